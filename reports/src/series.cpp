#include "precsim/reports/series.h"

#include <stdexcept>

#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"

namespace precsim {

int64_t resolve_log_every(const SeriesOptions& o, int64_t total_steps) {
  if (total_steps < 0) throw std::invalid_argument("total_steps must be >= 0, got " + std::to_string(total_steps));
  if (o.log_every < 0) throw std::invalid_argument("log_every must be >= 0 (0: automatic), got " + std::to_string(o.log_every));
  if (o.log_every > 0) return o.log_every;
  if (o.max_points < 2) throw std::invalid_argument("max_points must be >= 2, got " + std::to_string(o.max_points));
  // Multiples of k below total_steps number ceil(total/k) <= max_points - 1, which leaves room
  // for the last step.
  if (total_steps <= o.max_points) return 1;
  const int64_t room = o.max_points - 1;
  return (total_steps + room - 1) / room;
}

SeriesLog::SeriesLog(const SeriesOptions& o, int64_t total_steps)
    : options_(o), total_steps_(total_steps), log_every_(resolve_log_every(o, total_steps)) {}

namespace {

void check_name(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("a series needs a name");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) throw std::invalid_argument("series name '" + std::string(name) + "': allowed are letters, digits, '_', '-', '.'");
  }
}

}  // namespace

void SeriesLog::record(std::string_view name, int64_t step, double value) {
  auto it = series_.find(name);
  if (it == series_.end()) {
    check_name(name);
    it = series_.emplace(std::string(name), Points{}).first;
  }
  Points& p = it->second;
  if (step <= p.last_step || step < 0) {
    throw std::invalid_argument("series '" + std::string(name) + "': step " + std::to_string(step) +
                                " after step " + std::to_string(p.last_step) + "; steps must increase");
  }
  p.last_step = step;
  p.last_value = value;
  if (logged(step)) {
    p.step.push_back(step);
    p.value.push_back(value);
  }
  if (options_.full_npy) {
    p.full.push_back(static_cast<double>(step));
    p.full.push_back(value);
  }
}

nlohmann::json SeriesLog::to_json() const {
  nlohmann::json all = nlohmann::json::object();
  for (const auto& [name, p] : series_) {
    nlohmann::json steps(p.step);
    nlohmann::json values = nlohmann::json::array();
    for (double v : p.value) values.push_back(json_number(v));
    if (p.step.empty() || p.step.back() != p.last_step) {
      steps.push_back(p.last_step);
      values.push_back(json_number(p.last_value));
    }
    all[name] = {{"step", std::move(steps)}, {"value", std::move(values)}};
  }
  return {{"log_every", log_every_}, {"total_steps", total_steps_}, {"series", std::move(all)}};
}

nlohmann::json SeriesLog::write_npy(const std::filesystem::path& report_path) const {
  if (!options_.full_npy) throw std::logic_error("SeriesLog::write_npy needs SeriesOptions::full_npy");
  nlohmann::json files = nlohmann::json::object();
  const std::filesystem::path dir = report_path.parent_path();
  for (const auto& [name, p] : series_) {
    const std::string file = report_path.stem().string() + "." + name + ".npy";
    const size_t n = p.full.size() / 2;
    precsim::write_npy(dir / file, "<f8", {n, 2}, p.full.data(), p.full.size() * sizeof(double));
    files[name] = file;
  }
  return files;
}

}  // namespace precsim

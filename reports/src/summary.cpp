#include "precsim/reports/summary.h"

#include <fmt/format.h>

#include <cmath>

#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"

namespace precsim {

SeriesStats series_stats(const nlohmann::json& values) {
  SeriesStats s;
  double sum = 0;
  size_t finite = 0;
  for (const auto& e : values) {
    const double v = numeric_value(e);
    if (s.count == 0) s.first = v;
    s.last = v;
    ++s.count;
    if (!std::isfinite(v)) {
      ++s.nonfinite;
      continue;
    }
    s.min = finite ? std::min(s.min, v) : v;
    s.max = finite ? std::max(s.max, v) : v;
    sum += v;
    ++finite;
  }
  s.mean = finite ? sum / static_cast<double>(finite) : NAN;
  return s;
}

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}

std::string cell(const nlohmann::json& j) {
  if (j.is_object()) return "{...}";
  if (j.is_array()) return fmt::format("[{} items]", j.size());
  std::string s = scalar_text(j);
  return s.size() > 28 ? s.substr(0, 25) + "..." : s;
}

std::string inline_value(const nlohmann::json& j) {
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size() && i < 8; ++i) s += (i ? ", " : "") + cell(j[i]);
    if (j.size() > 8) s += fmt::format(", ... {} items", j.size());
    return s + "]";
  }
  return cell(j);
}

bool is_series_log(const nlohmann::json& j) {
  return j.is_object() && j.contains("step") && j.contains("value") && j["value"].is_array() && j["step"].is_array() &&
         (j["value"].empty() || is_numeric_array(j["value"]) || (j["value"].size() == 1 && is_numeric(j["value"][0])));
}

std::string series_line(const nlohmann::json& values, const nlohmann::json* steps) {
  if (values.empty()) return "series of 0 points";
  const SeriesStats s = series_stats(values);
  std::string out = fmt::format("series of {} points", s.count);
  if (steps && !steps->empty()) out += fmt::format(", steps {}..{}", scalar_text(steps->front()), scalar_text(steps->back()));
  out += fmt::format(": first {} last {} min {} max {} mean {}", num(s.first), num(s.last), num(s.min), num(s.max), num(s.mean));
  if (s.nonfinite) out += fmt::format(" ({} non-finite)", s.nonfinite);
  return out;
}

void table(std::string& out, const nlohmann::json& rows, const std::string& indent, size_t max_rows) {
  std::vector<std::string> cols;
  for (const auto& r : rows)
    for (auto it = r.begin(); it != r.end(); ++it)
      if (std::find(cols.begin(), cols.end(), it.key()) == cols.end()) cols.push_back(it.key());
  const size_t shown = std::min(rows.size(), max_rows);
  std::vector<size_t> width(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    width[c] = cols[c].size();
    for (size_t i = 0; i < shown; ++i)
      width[c] = std::max(width[c], rows[i].contains(cols[c]) ? cell(rows[i][cols[c]]).size() : 1);
  }
  auto line = [&](auto&& get) {
    std::string l = indent;
    for (size_t c = 0; c < cols.size(); ++c) l += fmt::format("{:<{}}", get(c), width[c] + 2);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line([&](size_t c) { return cols[c]; });
  for (size_t i = 0; i < shown; ++i)
    line([&](size_t c) { return rows[i].contains(cols[c]) ? cell(rows[i][cols[c]]) : std::string("-"); });
  if (rows.size() > shown) out += fmt::format("{}... {} more rows (--rows N shows more)\n", indent, rows.size() - shown);
}

bool all_objects(const nlohmann::json& a) {
  if (!a.is_array() || a.empty()) return false;
  for (const auto& e : a)
    if (!e.is_object()) return false;
  return true;
}

void render(std::string& out, const std::string& key, const nlohmann::json& j, const std::string& indent, size_t max_rows) {
  if (is_series_log(j)) {
    out += fmt::format("{}{}: {}\n", indent, key, series_line(j["value"], &j["step"]));
  } else if (is_numeric_array(j) && j.size() > 8) {
    out += fmt::format("{}{}: {}\n", indent, key, series_line(j, nullptr));
  } else if (all_objects(j)) {
    out += fmt::format("{}{} ({} rows)\n", indent, key, j.size());
    table(out, j, indent + "  ", max_rows);
  } else if (j.is_object()) {
    out += fmt::format("{}{}\n", indent, key);
    for (auto it = j.begin(); it != j.end(); ++it) render(out, it.key(), it.value(), indent + "  ", max_rows);
  } else {
    out += fmt::format("{}{} = {}\n", indent, key, inline_value(j));
  }
}

}  // namespace

std::string report_header(const nlohmann::json& doc) {
  std::string out;
  const auto& tool = doc["tool"];
  out += fmt::format("{} report ({}), {}\n", doc["kind"].get<std::string>(), doc["status"].get<std::string>(),
                     doc["schema"].get<std::string>());
  auto field = [](const nlohmann::json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) ? scalar_text(obj[key]) : std::string("?");
  };
  out += fmt::format("tool: {} {} commit {} ({}, {})\n", field(tool, "name"), field(tool, "version"), field(tool, "commit"),
                     field(tool, "build_type"), field(tool, "compiler"));
  const std::string recomputed = results_digest(doc["results"]);
  out += fmt::format("digest: {} ({})\n", doc["digest"].get<std::string>(),
                     doc["digest"] == recomputed ? "matches the results" : "DOES NOT MATCH the results: " + recomputed);
  if (doc.contains("environment")) {
    const auto& e = doc["environment"];
    out += fmt::format("run: {} on {} ({}), {} threads, {} s\n", field(e, "date"), field(e, "host"), field(e, "cpu"),
                       field(e, "threads"), field(e, "wall_time_s"));
  }
  return out;
}

std::string summarize_report(const nlohmann::json& doc, const SummaryOptions& o) {
  std::string out = report_header(doc);  for (const char* section : {"config", "seeds"}) {
    out += std::string(section) + (doc[section].empty() ? ": (none)\n" : "\n");
    for_each_leaf(doc[section], "", true, [&](const std::string& p, const nlohmann::json& v) {
      out += fmt::format("  {} = {}\n", p, inline_value(v));
    });
  }
  out += "results\n";
  for (auto it = doc["results"].begin(); it != doc["results"].end(); ++it) render(out, it.key(), it.value(), "  ", o.max_rows);
  return out;
}

}  // namespace precsim

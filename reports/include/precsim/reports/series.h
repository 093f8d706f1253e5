// Per-step series for long runs (docs/CONVENTIONS.md, Reports): the report keeps a point every `log_every`
// steps (by default chosen so that a series has at most 1000 points) plus the last recorded
// step, so "final" is always exact; the full series can go to .npy files beside the report.
//
//   SeriesLog log({.max_points = 1000, .full_npy = want_npy}, total_steps);
//   for (step ...) { log.record("loss", step, loss); log.record("grad_norm", step, g); }
//   results["series"] = log.to_json();
//   if (want_npy) results["series_npy"] = log.write_npy(out_path);  // before emit_report
//
// JSON shape (reports/schema: $defs/series_log):
//   {"log_every": 10, "total_steps": 10000,
//    "series": {"loss": {"step": [0, 10, ..., 9999], "value": [2.3, ..., "nan"]}, ...}}
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

struct SeriesOptions {
  int64_t log_every = 0;      // 0: the smallest stride that keeps at most max_points points
  int64_t max_points = 1000;  // >= 2 (used only when log_every is 0)
  bool full_npy = false;      // keep every recorded point for write_npy
};

// The stride used for `total_steps` steps; throws std::invalid_argument on a negative
// log_every, max_points < 2 or total_steps < 0.
int64_t resolve_log_every(const SeriesOptions& o, int64_t total_steps);

class SeriesLog {
 public:
  SeriesLog(const SeriesOptions& o, int64_t total_steps);

  int64_t log_every() const { return log_every_; }
  // Whether a point at `step` goes into the report (the last recorded one always does).
  bool logged(int64_t step) const { return step % log_every_ == 0; }

  // Steps of one series must increase; a name is letters, digits, '_', '-' or '.' (it becomes
  // part of a file name). Throws std::invalid_argument otherwise.
  void record(std::string_view name, int64_t step, double value);

  nlohmann::json to_json() const;
  // Writes each full series as "<report stem>.<name>.npy" beside `report_path`: float64, shape
  // (n, 2), columns step and value, through write_npy (atomic). Returns {name: file name}, the
  // names relative to the report's folder. Throws std::logic_error without full_npy.
  nlohmann::json write_npy(const std::filesystem::path& report_path) const;

 private:
  struct Points {
    std::vector<int64_t> step;
    std::vector<double> value;
    int64_t last_step = -1;
    double last_value = 0;
    std::vector<double> full;  // step, value interleaved (only with full_npy)
  };
  SeriesOptions options_;
  int64_t total_steps_;
  int64_t log_every_;
  std::map<std::string, Points, std::less<>> series_;
};

}  // namespace precsim

// `precsim report summary`: the human view of any report. Configuration and seeds as key = value,
// arrays of records as tables, series (arrays of numbers, SeriesLog objects) as one line of
// statistics each, scalars as key = value.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace precsim {

struct SummaryOptions {
  size_t max_rows = 20;  // table rows shown; the rest are counted
};

// `doc` must have passed check_envelope. The first lines, report_header, name the kind, status,
// tool, digest (recomputed) and environment; then configuration, seeds and results.
std::string report_header(const nlohmann::json& doc);
std::string summarize_report(const nlohmann::json& doc, const SummaryOptions& o = {});

// Statistics of a numeric series, in index order: count, non-finite count, first, last, min,
// max, mean over the finite entries.
struct SeriesStats {
  size_t count = 0, nonfinite = 0;
  double first = 0, last = 0, min = 0, max = 0, mean = 0;
};
SeriesStats series_stats(const nlohmann::json& values);

}  // namespace precsim

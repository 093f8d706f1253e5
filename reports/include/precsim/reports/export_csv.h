// `precsim report export --csv DIR R.json`: the report's tables and series as CSV files for
// spreadsheets and plotting tools. Every file is written atomically.
//   config.csv            path,value for every configuration and seed entry
//   scalars.csv           path,value for every scalar result
//   <path>.csv            an array of records (columns: the union of their keys, nested
//                         objects as dotted columns), e.g. results.formats -> formats.csv
//   train_steps.csv, train_summary.csv, train_variants.csv   for train and demo reports
//                         instead of their runs and variants: tidy tables, one row per seed,
//                         variant and logged step (reports/src/export_train_csv.h)
//   <path>.csv            a series: step,value for SeriesLog objects, index,value for arrays
// Values are written as in the JSON ("nan", "inf", hex-floats stay strings).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

// Creates `dir` if its parent exists; returns the file names written, relative to `dir`.
// Throws std::runtime_error naming the path on an I/O error.
std::vector<std::string> export_csv(const nlohmann::json& doc, const std::filesystem::path& dir);

}  // namespace precsim

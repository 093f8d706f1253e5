// `precsim report export --csv DIR R.json`: the report's tables and series as CSV files for
// spreadsheets and plotting tools. Every file is written atomically.
//   config.csv            path,value for every configuration and seed entry
//   scalars.csv           path,value for every scalar result
//   <path>.csv            an array of records (columns: the union of their keys), e.g.
//                         results.formats -> formats.csv
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

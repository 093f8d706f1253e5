// The text tables commands print, made from their reports' results, so that a command and
// `precsim report summary` on its saved report print the same table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace precsim::cli {

// analyze: one table; a `tensor` column when there are several tensors. `sort`: qsnr (best first),
// mse (smallest first) or flushed (fewest first); `worst` > 0 keeps only the worst N rows, worst
// first. Throws UsageError for another sort key.
std::string analyze_table(const nlohmann::json& results, const std::string& sort = "qsnr", size_t worst = 0);

std::string gemm_table_header();
std::string gemm_table_row(int64_t k, const nlohmann::json& model_entry);  // an entry of sweep[].models

std::string allreduce_table_header();
std::string allreduce_table_row(const nlohmann::json& run);  // an entry of results.runs

// The table of a report of kind analyze, gemm or allreduce; nullopt for other kinds.
std::optional<std::string> command_table(const nlohmann::json& doc);

}  // namespace precsim::cli

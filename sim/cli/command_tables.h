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

// formats, quantize (any mode: config.mode) and dot (value_tables.cpp).
std::string formats_table(const nlohmann::json& results);
std::string quantize_table(const nlohmann::json& config, const nlohmann::json& results);
std::string dot_table(const nlohmann::json& config, const nlohmann::json& results);
std::string mma_table(const nlohmann::json& config, const nlohmann::json& results);

// train and demo: the variant table (runner.h's summary_table), the twin's table when the run had
// a --backend, and with several seeds a line saying what ± is.
std::string train_table(const nlohmann::json& results);

// The table a report's command printed (every kind but the gpu ones); nullopt for a kind without
// one.
std::optional<std::string> command_table(const nlohmann::json& doc);

}  // namespace precsim::cli

#include "command_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cli_common.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/attribution.h"
#include "precsim/sim/experiment/recipe_search.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/sweep_merge.h"
#include "precsim/sim/experiment/train_findings.h"
#include "scheme_report.h"

namespace precsim::cli {
namespace {

struct AnalyzeRow {
  std::string tensor;
  const nlohmann::json* scheme;
};

double field(const AnalyzeRow& r, const char* key) { return read_number((*r.scheme)[key]); }

// Best first; NaN (a scheme a NaN block spoilt) last.
std::vector<AnalyzeRow> sorted_rows(const nlohmann::json& results, const std::string& sort) {
  std::vector<AnalyzeRow> rows;
  for (const auto& t : results.at("tensors"))
    if (unranked_reason(t).empty())
      for (const auto& s : t.at("schemes")) rows.push_back({t.at("name").get<std::string>(), &s});
  const char* key = sort == "qsnr" ? "qsnr_db" : sort == "mse" ? "mse" : sort == "flushed" ? "flushed_fraction" : nullptr;
  if (key == nullptr) throw UsageError("--sort '" + sort + "' is not a sort key; allowed: qsnr, flushed, mse");
  const bool higher_is_better = sort == "qsnr";
  std::stable_sort(rows.begin(), rows.end(), [&](const AnalyzeRow& x, const AnalyzeRow& y) {
    const double a = field(x, key), b = field(y, key);
    if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    return higher_is_better ? a > b : a < b;
  });
  return rows;
}

// Per variant and seed, the twin on its GEMM executor against the emulated variant.
std::string twin_table(const nlohmann::json& results) {
  std::string t = fmt::format("\n{:<20} {:>5} {:>16} {:>16} {:>9}\n", results["backend"]["name"].get<std::string>() + " twin",
                              "seed", "max|loss diff|", "max weight err", "diverged");
  for (const auto& run : results["runs"])
    for (const auto& v : run["variants"]) {
      const auto& s = v["backend"]["summary"];
      t += fmt::format("{:<20} {:>5} {:>16.3g} {:>16.3g} {:>9}\n", v["name"].get<std::string>(), run["seed"].get<uint64_t>(),
                       read_number(s["max_abs_loss_diff"]), read_number(s["max_weight_rel_err"]),
                       s["diverged_at"].is_null() ? "-" : std::to_string(s["diverged_at"].get<int64_t>()));
    }
  return t;
}

}  // namespace

std::string train_table(const nlohmann::json& results) {
  const TrainSummary s = train_summary_from_json(results);
  std::string t = train_summary_table(s) + split_table(results);
  if (results.contains("backend")) t += twin_table(results);
  const auto& runs = results.at("runs");
  if (runs.is_array() && runs.size() > 1)
    t += fmt::format("({} seeds; ± is the 95% interval of the mean; report compare pairs two variants by seed)\n", runs.size());
  t += "\n" + train_summary_legend(s) + "findings:\n";
  for (const std::string& f : train_findings(s)) t += "  - " + f + "\n";
  return t;
}

std::string analyze_table(const nlohmann::json& results, const std::string& sort, size_t worst) {
  std::vector<AnalyzeRow> rows = sorted_rows(results, sort);
  if (worst > 0 && worst < rows.size()) rows.erase(rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(worst));
  if (worst > 0) std::reverse(rows.begin(), rows.end());
  const bool several = results.at("tensors").size() > 1;
  size_t width = 6;
  for (const auto& r : rows) width = std::max(width, r.tensor.size());
  std::string out = several ? fmt::format("{:<{}} ", "tensor", width) : "";
  out += scheme_table_header();
  for (const auto& r : rows) out += (several ? fmt::format("{:<{}} ", r.tensor, width) : "") + scheme_table_row(*r.scheme);
  for (const auto& t : results.at("tensors"))
    if (const std::string why = unranked_reason(t); !why.empty())
      out += fmt::format("not ranked: {} ({}; its metrics are in the report)\n", t.at("name").get<std::string>(), why);
  return out;
}

std::string gemm_table_header() {
  return fmt::format("{:>7} {:<22} {:>11} {:>11} {:>11} {:>9} {:>9}\n", "K", "model", "max rel", "mean rel", "normwise",
                     "max ulp", "mean ulp");
}

std::string gemm_table_row(int64_t k, const nlohmann::json& m) {
  const auto& e = m.at("error");
  return fmt::format("{:>7} {:<22} {:>11.4e} {:>11.4e} {:>11.4e} {:>9} {:>9.3f}\n", k, m.at("model").get<std::string>(),
                     read_number(e.at("max_rel_error")), read_number(e.at("mean_rel_error")),
                     read_number(e.at("normwise_error")), e.at("max_ulp_error").get<int64_t>(),
                     read_number(e.at("mean_ulp_error")));
}

std::string allreduce_table_header() {
  return fmt::format("{:>7} {:<16} {:<18} {:<12} {:>13} {:>13} {:>12} {}\n", "workers", "format", "algorithm", "average",
                     "rel_err_norm", "rel_err_max", "mean_bias", "ranks_identical");
}

std::string allreduce_table_row(const nlohmann::json& r) {
  return fmt::format("{:>7} {:<16} {:<18} {:<12} {:>13.4e} {:>13.4e} {:>12.3e} {}\n", r.at("workers").get<int>(),
                     r.at("format").get<std::string>(), r.at("algorithm").get<std::string>(),
                     r.at("average").get<std::string>(), read_number(r.at("rel_err_norm")),
                     read_number(r.at("rel_err_max")), read_number(r.at("mean_rel_bias")),
                     r.at("ranks_identical").get<bool>() ? "yes" : "NO");
}

std::optional<std::string> command_table(const nlohmann::json& doc) {
  const std::string kind = doc.at("kind").get<std::string>();
  const auto& results = doc.at("results");
  if (kind == "formats") return formats_table(results);
  if (kind == "quantize") return quantize_table(doc.at("config"), results);
  if (kind == "dot") return dot_table(doc.at("config"), results);
  if (kind == "mma") return mma_table(doc.at("config"), results);
  if (kind == "train" || kind == "demo") return train_table(results);
  if (kind == "analyze") return analyze_table(results);
  if (kind == "sweep") return sweep_points_table(results);
  if (kind == "attribute") return attribution_table(results);
  if (kind == "search") return search_table(results);
  std::string out;
  if (kind == "gemm") {
    out = gemm_table_header();
    for (const auto& s : results.at("sweep"))
      for (const auto& m : s.at("models")) out += gemm_table_row(s.at("k").get<int64_t>(), m);
    return out;
  }
  if (kind == "allreduce") {
    out = allreduce_table_header();
    for (const auto& r : results.at("runs")) out += allreduce_table_row(r);
    return out;
  }
  return std::nullopt;
}

}  // namespace precsim::cli

// The tables of formats, quantize and dot, made from their reports, so that the command and
// `precsim report summary` on its saved report print the same text (command_tables.h).
#include <fmt/format.h>

#include <cmath>

#include "command_tables.h"
#include "precsim/reports/report.h"
#include "scheme_report.h"

namespace precsim::cli {
namespace {

double num(const nlohmann::json& j, const char* key) { return read_number(j.at(key)); }
std::string str(const nlohmann::json& j, const char* key) { return j.at(key).get<std::string>(); }

// One line per input value: the input, the code, its fields and the value. A report holds the
// input as a number, not as it was typed, so the input shows as the shorter of its shortest
// decimal and its hex-float (0x1p-10, not 0.0009765625; 1.3, not 0x1.4cccccccccccdp+0).
std::string quantize_values_table(const nlohmann::json& results) {
  std::string out = fmt::format("{:<24} {:<10} {:<16} {:<26} {:<12} {:<12} {}\n", "input", "code", "s|e|m", "value",
                                "abs err", "rel err", "status");
  for (const auto& row : results.at("values")) {
    const std::string decimal = fmt::format("{}", num(row, "input")), hex = str(row, "input_hex");
    const std::string& shown = hex.size() < decimal.size() ? hex : decimal;
    out += fmt::format("{:<24} {:<10} {:<16} {:<26} {:<12.4g} {:<12.4g} {}\n", shown, str(row, "code"), str(row, "fields"),
                       fmt::format("{:.17g}", num(row, "value")), num(row, "abs_error"), num(row, "rel_error"),
                       str(row, "status"));
  }
  return out;
}

}  // namespace

std::string formats_table(const nlohmann::json& results) {
  std::string out = fmt::format("{:<19} {:<22} {:>4} {:>5} {:>5} {:>5} {:<11} {:>12} {:>12} {:>12} {:>10} {:>11} {:>8}\n",
                                "name", "aliases", "bits", "bias", "emin", "emax", "nonfinite", "max", "min normal",
                                "min subnorm", "epsilon", "finite vals", "binades");
  for (const auto& f : results.at("formats")) {
    std::string aliases;
    for (const auto& a : f.at("aliases")) aliases += (aliases.empty() ? "" : ",") + a.get<std::string>();
    out += fmt::format("{:<19} {:<22} {:>4} {:>5} {:>5} {:>5} {:<11} {:>12.6g} {:>12.6g} {:>12.6g} {:>10.4g} {:>11} {:>8.2f}\n",
                       str(f, "name"), aliases, f.at("bits").get<int>(), f.at("bias").get<int>(), f.at("emin").get<int>(),
                       f.at("emax").get<int>(), str(f, "nonfinite"), num(f, "max_finite"), num(f, "min_normal"),
                       num(f, "min_subnormal"), num(f, "epsilon"), f.at("finite_values").get<uint64_t>(),
                       num(f, "range_binades"));
  }
  return out;
}

std::string quantize_table(const nlohmann::json& config, const nlohmann::json& results) {
  const std::string mode = str(config, "mode");
  if (mode == "values") return quantize_values_table(results);
  if (mode.starts_with("array-scheme")) return scheme_table_header() + scheme_table_row(results.at("scheme"));
  const auto& st = results.at("stats");
  const auto n = [&](const char* key) { return st.at(key).get<uint64_t>(); };
  return fmt::format("{} elements: inexact {}, underflow to zero {}, subnormal {}, overflow {}, saturated {}, NaN {}\n",
                     n("count"), n("inexact"), n("underflow_to_zero"), n("subnormal"), n("overflow"), n("saturated"),
                     n("nan"));
}

std::string dot_table(const nlohmann::json& config, const nlohmann::json& results) {
  const auto& model = config.at("model");
  const std::string acc = str(config.at("accumulator_format"), "name");
  std::string out = fmt::format("model     {} ({})\n", str(model, "name"), str(model, "spec"));
  const std::string in = str(config.at("input_format"), "name");
  const std::string ops = config.contains("b_format") ? "A " + in + ", B " + str(config.at("b_format"), "name") : in;
  out += fmt::format("inputs    {} x {}, accumulator {}\n", config.at("a").size(), ops, acc);
  out += fmt::format("exact     {:<24} {:.17g}{}\n", str(results, "exact_hex"), num(results, "exact"),
                     results.at("exact_fits_fp64").get<bool>() ? "" : " (rounded to fp64)");
  out += fmt::format("result    {:<24} {:.17g}\n", str(results, "result_hex"), num(results, "result"));
  out += fmt::format("error     abs {:.6g}  rel {:.6g}  {} ulp of {} from the correctly rounded {}\n",
                     num(results, "abs_error"), num(results, "rel_error"), results.at("ulp_error").get<int64_t>(), acc,
                     hex_float(num(results, "exact_rounded_to_accumulator")));
  return out;
}

std::string mma_table(const nlohmann::json& config, const nlohmann::json& results) {
  const auto& f = config.at("formats");
  const auto& sh = config.at("shape");
  std::string out = fmt::format("instruction {} ({})\n", str(config, "instruction"), str(config.at("model"), "spec"));
  out += fmt::format("shape       m{} n{} k{}: A {}, B {}, C {}, D {}\n", sh.at("m").get<int64_t>(),
                     sh.at("n").get<int64_t>(), sh.at("k").get<int64_t>(), str(f.at("a"), "name"),
                     str(f.at("b"), "name"), str(f.at("c"), "name"), str(f.at("d"), "name"));
  out += fmt::format("outputs     {}: {} correctly rounded, {} NaN, {} Inf; at most {} ulp of {} from the exact A B + C\n",
                     results.at("outputs").get<int64_t>(), results.at("correctly_rounded_outputs").get<int64_t>(),
                     results.at("nan_outputs").get<int64_t>(), results.at("inf_outputs").get<int64_t>(),
                     results.at("max_ulp_error").get<int64_t>(), str(f.at("d"), "name"));
  return out;
}

}  // namespace precsim::cli

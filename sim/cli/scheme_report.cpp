#include "scheme_report.h"

#include <fmt/format.h>

#include <cmath>

#include "precsim/reports/report.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

// The window of magnitudes the element format holds, as log2 (for block-scaled schemes, in units
// of the block scale: add the scale histogram's exponents to place it on the input's axis).
nlohmann::json window_json(const BlockScaling& s) {
  const Format& f = s.element;
  const int ee = s.element_exp();
  // min_exp / max_exp: the binades from the smallest subnormal to the largest finite value.
  return {{"min_exp", f.quantum_exp() + ee},
          {"min_normal_exp", f.emin() + ee},
          {"max_exp", f.emax() + ee},
          {"max_log2", json_number(std::log2(f.max_finite()) + ee)}};
}

}  // namespace

nlohmann::json scheme_to_json(const BlockScaling& s) {
  return {{"name", s.name},
          {"element", format_to_json(s.element)},
          {"rule", to_string(s.rule)},
          {"scale_format", to_string(s.scale_format)},
          {"block_along", s.block_along},
          {"block_across", s.block_across},
          {"axis", s.axis},
          {"amax_epsilon", s.amax_epsilon},
          {"margin", s.margin},
          {"element_exp", s.element_exp()},
          {"element_options", quant_options_to_json(s.element_options)}};
}

nlohmann::json histogram_json(const std::map<int, uint64_t>& h) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [k, c] : h) out.push_back({{"exponent", k}, {"count", c}});
  return out;
}

nlohmann::json scheme_result_json(const SchemeAnalysis& r) {
  const ErrorStats& e = r.error;
  const BlockStats& bs = r.blocks;
  nlohmann::json j = {{"scheme", r.scheme.name},
          {"description", scheme_to_json(r.scheme)},
          {"window", window_json(r.scheme)},
          {"qsnr_db", json_number(e.qsnr_db)},
          {"mse", json_number(e.mse)},
          {"max_rel_error", json_number(e.max_rel_error)},
          {"flushed_fraction", json_number(r.flushed_fraction)},
          {"flushed", e.flushed},
          {"nonzero_inputs", e.nonzero_inputs},
          {"blocks", bs.blocks},
          {"clipped_blocks", bs.clipped_blocks},
          {"clipped_blocks_fraction", json_number(r.clipped_fraction)},
          {"saturated", bs.saturated},
          {"saturated_fraction", json_number(r.saturated_fraction)},
          {"nonfinite_inputs", bs.nonfinite_inputs},
          {"nonfinite_blocks", bs.nonfinite_blocks},
          {"bits_per_element", json_number(r.bits_per_element)},
          {"scale_log2_histogram", histogram_json(bs.scale_log2_histogram)}};
  // Only where there is something to count, so that reports of finite tensors keep their digests.
  if (bs.nonfinite_inputs) j["poisoned"] = r.poisoned;
  return j;
}

std::string scheme_table_header() {
  return fmt::format("{:<28} {:>9} {:>11} {:>10} {:>9} {:>9} {:>9} {:>6}\n", "scheme", "QSNR dB", "MSE", "max rel",
                     "flushed", "clipped", "satur.", "bits");
}

std::string scheme_table_row(const nlohmann::json& r) {
  const auto num = [&](const char* key) { return read_number(r.at(key)); };
  return fmt::format("{:<28} {:>9.2f} {:>11.3e} {:>10.3g} {:>8.3f}% {:>8.2f}% {:>8.4f}% {:>6.3f}\n",
                     r.at("scheme").get<std::string>(), num("qsnr_db"), num("mse"), num("max_rel_error"),
                     100 * num("flushed_fraction"), 100 * num("clipped_blocks_fraction"), 100 * num("saturated_fraction"),
                     num("bits_per_element"));
}

std::string nonfinite_warning(const std::string& name, uint64_t nonfinite, uint64_t count,
                              std::span<const SchemeAnalysis> schemes) {
  if (nonfinite == 0) return "";
  std::string lost;
  for (const auto& r : schemes)
    if (r.poisoned) lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", r.scheme.name, r.poisoned);
  return fmt::format("warning: {}: {} of {} inputs are NaN or Inf; the metrics are over the finite inputs{}\n", name,
                     nonfinite, count,
                     lost.empty() ? "" : "; finite inputs made NaN by a NaN or Inf in their block: " + lost);
}

}  // namespace precsim::cli

#include "precsim/sim/analysis/tensor_report.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"

namespace precsim {
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

nlohmann::json format_to_json(const Format& f) {
  return {{"name", f.name},
          {"exponent_bits", f.exp_bits},
          {"mantissa_bits", f.man_bits},
          {"bias", f.bias},
          {"subnormals", f.subnormals},
          {"nonfinite", to_string(f.nonfinite)},
          {"signed", f.is_signed},
          {"kind", f.kind == FormatKind::kInt ? "int" : "float"}};
}

nlohmann::json quant_options_to_json(const QuantOptions& o) {
  return {{"rounding", to_string(o.rounding)},
          {"overflow", to_string(o.overflow)},
          {"flush_subnormals", o.flush_subnormals},
          {"sr_bits", o.sr_bits},
          {"sr_seed", o.sr_key.seed}};
}

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

nlohmann::json tensor_analysis_json(const TensorAnalysis& a) {
  nlohmann::json schemes = nlohmann::json::array();
  for (const auto& r : a.schemes) schemes.push_back(scheme_result_json(r));
  return {{"rows", a.rows},
          {"cols", a.cols},
          {"count", a.count},
          {"zeros", a.zeros},
          {"nonfinite", a.nonfinite},
          {"exponent_histogram", histogram_json(a.exponent_histogram)},
          {"schemes", schemes}};
}

}  // namespace precsim

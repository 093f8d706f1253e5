#include "precsim/sim/analysis/tensor_analysis.h"

#include <cmath>
#include <stdexcept>

#include "precsim/formats/format.h"

namespace precsim {

std::pair<size_t, size_t> as_2d(const std::vector<size_t>& shape) {
  if (shape.empty()) return {1, 1};
  size_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return {rows, shape.back()};
}

std::vector<BlockScaling> resolve_schemes(const std::vector<std::string>& names, const QuantOptions& o) {
  std::vector<std::string> expanded;
  for (const auto& f : names) {
    if (f == "all") {
      for (const auto& p : format_presets()) expanded.push_back(p.format.name);
      for (const auto& p : block_scaling_presets()) expanded.push_back(p);
    } else {
      expanded.push_back(f);
    }
  }
  if (expanded.empty()) throw std::invalid_argument("give at least one format or scheme (or 'all')");
  std::vector<BlockScaling> out;
  for (const auto& n : expanded) {
    BlockScaling s = parse_block_scaling(n);
    const Overflow keep = s.element_options.overflow;
    s.element_options = o;
    if (!s.is_plain()) s.element_options.overflow = keep;
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

double ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

SchemeAnalysis analyze_scheme(std::span<const float> values, size_t rows, size_t cols, const BlockScaling& s,
                              uint32_t tensor_index, std::span<float> q) {
  SchemeAnalysis r;
  r.scheme = s;
  r.scheme.element_options.sr_key.tensor = tensor_index;
  block_fake_quantize(r.scheme, values, q, rows, cols, &r.blocks);
  r.error = error_stats(values, q);
  r.flushed_fraction = ratio(r.error.flushed, r.error.nonzero_inputs);
  r.clipped_fraction = ratio(r.blocks.clipped_blocks, r.blocks.blocks);
  r.saturated_fraction = ratio(r.blocks.saturated, r.error.count);
  r.bits_per_element = r.scheme.bits_per_element(rows, cols);
  for (size_t i = 0; i < values.size(); ++i) r.poisoned += std::isfinite(values[i]) && !std::isfinite(q[i]);
  return r;
}

TensorAnalysis analyze_tensor(std::span<const float> values, const std::vector<size_t>& shape,
                              const std::vector<BlockScaling>& schemes, uint32_t tensor_index) {
  TensorAnalysis t;
  std::tie(t.rows, t.cols) = as_2d(shape);
  t.count = values.size();
  for (float v : values) {
    if (!std::isfinite(v)) ++t.nonfinite;
    else if (v == 0) ++t.zeros;
    else ++t.exponent_histogram[std::ilogb(v)];
  }
  std::vector<float> q(values.size());
  for (const auto& s : schemes) t.schemes.push_back(analyze_scheme(values, t.rows, t.cols, s, tensor_index, q));
  return t;
}

}  // namespace precsim

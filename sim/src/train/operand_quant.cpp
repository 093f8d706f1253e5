#include "precsim/sim/train/operand_quant.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "precsim/formats/hadamard.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {


void add_block_stats(QuantStats* q, const BlockStats& b) {
  if (!q) return;
  q->count += b.elements;
  q->underflow_to_zero += b.flushed;
  q->saturated += b.saturated;
  q->nan += b.nonfinite_inputs;
}

// Copies in to out and tells whether every value is zero or a finite normal float: each of those is
// its own FP32 rounding with no status bit in any rounding mode, so the copy is what quantize()
// would write and count. Compiled for x86-64-v4, v3 and the baseline (GCC function multiversioning).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
bool copy_if_plain_fp32(const float* in, float* out, size_t n) {
  uint32_t odd = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
    const uint32_t e = bits & 0x7f800000u;
    odd |= (e == 0x7f800000u) | ((e == 0) & ((bits & 0x7fffffu) != 0));  // Inf, NaN; subnormal
    out[i] = in[i];
  }
  return odd == 0;
}

}  // namespace

BlockScaling operand_scaling(const OperandSpec& spec, int margin) {
  const Format& f = spec.fmt.format;
  switch (spec.scaling) {
    case Scaling::kNone: break;
    case Scaling::kTensorCurrent:
    case Scaling::kTensorDelayed: return amax_block_scaling(f, 0, 0, false, margin);
    case Scaling::kRowwise: return amax_block_scaling(f, spec.block, 1, true);
    case Scaling::kBlock2d: return amax_block_scaling(f, spec.block, spec.block, true);
    case Scaling::kMx:
      // By encoding, not by name: a custom "e4m3:nanonly" is float8_e4m3fn.
      if (!mx_scheme_name(f))
        throw std::invalid_argument(fmt::format(
            "scaling mx needs an MX element format (e4m3, e5m2, e2m3, e3m2, e2m1, int8), got '{}'", f.name));
      return mx_block_scaling(f, spec.block, spec.mx_rule, spec.two_d);
    case Scaling::kNvfp4:
      if (!same_encoding(f, format_by_name("float4_e2m1fn")))
        throw std::invalid_argument("scaling nvfp4 needs element format e2m1, got '" + f.name + "'");
      return nvfp4_block_scaling(spec.two_d, spec.four_over_six);
  }
  BlockScaling plain;
  plain.element = f;
  plain.name = f.name;
  return plain;
}

std::string operand_scheme(const OperandSpec& spec, int margin) { return operand_scaling(spec, margin).name; }

OperandQuantizer::OperandQuantizer(const OperandSpec& spec, int amax_history_len, int margin)
    : spec_(spec), history_len_(amax_history_len), margin_(margin) {
  if (spec.scaling != Scaling::kNone) scheme_ = operand_scaling(spec, margin);
}

BlockScaling OperandQuantizer::scheme_for(int axis, const SrKey& key) const {
  BlockScaling s = *scheme_;
  s.axis = axis;
  s.element_options.rounding = spec_.fmt.rounding;
  s.element_options.sr_key = key;
  return s;
}

Format OperandQuantizer::apply(std::span<const float> in, std::span<float> out, size_t rows, size_t cols, int axis,
                               const SrKey& key, QuantStats* stats, std::shared_ptr<DelayedScaling>* delayed) const {
  const OperandSpec& spec = spec_;
  if (spec.scaling == Scaling::kNone) {
    // An FP32 operand of zeros and normal values (nearly always): one copy instead of the quantizer,
    // which takes any array holding a subnormal, Inf or NaN.
    static const Format fp32 = format_by_name("fp32");
    if (same_encoding(spec.fmt.format, fp32) && in.size() == out.size() && copy_if_plain_fp32(in.data(), out.data(), in.size())) {
      if (stats) stats->count += in.size();
      return spec.fmt.format;
    }
    QuantOptions o;
    o.rounding = spec.fmt.rounding;
    o.sr_key = key;
    quantize(spec.fmt.format, in, out, o, stats);
    return spec.fmt.format;
  }
  const BlockScaling s = scheme_for(axis, key);
  BlockStats bs;
  if (spec.scaling == Scaling::kTensorDelayed) {
    if (!*delayed) *delayed = std::make_shared<DelayedScaling>(s.max_elem(), history_len_, DelayedScaling::Algo::kMax, margin_);
    fake_quantize_with_scale(s, (*delayed)->scale(), in, out, &bs);
    (*delayed)->update(static_cast<float>(finite_amax(in)));
  } else {
    block_fake_quantize(s, in, out, rows, cols, &bs);
  }
  add_block_stats(stats, bs);
  return format_by_name("fp32");
}

Format OperandQuantizer::apply_transformed(std::span<const double> signs, std::span<const float> in,
                                           std::span<float> out, size_t rows, size_t cols, int axis, const SrKey& key,
                                           QuantStats* stats, std::shared_ptr<DelayedScaling>* delayed) const {
  if (spec_.scaling == Scaling::kNone || spec_.scaling == Scaling::kTensorDelayed) {
    std::vector<float> t(in.size());
    random_hadamard_transform(in, t, rows, cols, axis, signs);
    return apply(t, out, rows, cols, axis, key, stats, delayed);
  }
  const BlockScaling s = scheme_for(axis, key);
  BlockStats bs;
  rht_block_fake_quantize(s, signs, in, out, rows, cols, &bs);
  add_block_stats(stats, bs);
  return format_by_name("fp32");
}

void OperandQuantizer::apply_codes(std::span<const float> in, size_t rows, size_t cols, int axis, const SrKey& key,
                                   InstructionOperand& out) const {
  if (spec_.scaling != Scaling::kMx && spec_.scaling != Scaling::kNvfp4)
    throw std::logic_error("OperandQuantizer::apply_codes: MX and NVFP4 operands only");
  const BlockScaling s = scheme_for(axis, key);
  const BlockPacked p = block_quantize(s, in, rows, cols);
  const Format& f = s.element;
  if (f.bits() > 8) throw std::logic_error("OperandQuantizer::apply_codes: elements wider than a byte");
  std::array<float, 256> lut{};
  for (uint32_t c = 0; c < (1u << f.bits()); ++c)
    lut[c] = static_cast<float>(std::ldexp(decode(f, c), s.element_exp()));
  // Scale rows in block order (across the axis) become one row per row of op(X).
  const size_t op_rows = axis == 1 ? rows : cols, along = axis == 1 ? cols : rows;
  const size_t across = s.block_across ? size_t(s.block_across) : op_rows;
  out.element = f;
  out.block_k = s.block_along ? s.block_along : int64_t(along);
  out.groups = int64_t(p.scale_cols);
  out.tensor_scale = p.tensor_scale;
  out.scales.resize(op_rows * p.scale_cols);
  std::vector<uint8_t> nan_block(out.scales.size());
  const Format e4m3 = format_by_name("float8_e4m3fn");
  for (size_t r = 0; r < op_rows; ++r)
    for (size_t q = 0; q < p.scale_cols; ++q) {
      const uint8_t code = p.scales[(r / across) * p.scale_cols + q];
      double v = s.scale_format == ScaleFormat::kE4M3 ? decode(e4m3, code)
                 : code == 0xff                       ? NAN
                                                      : std::ldexp(1.0, int{code} - 127);
      nan_block[r * p.scale_cols + q] = std::isnan(v);
      out.scales[r * p.scale_cols + q] = std::isnan(v) ? 1.0f : static_cast<float>(v);
    }
  // Codes are stored with the block axis along the stored rows (op(X)'s rows), FP4 two per byte.
  out.values.resize(rows * cols);
  const bool nibbles = f.bits() <= 4;
  for (size_t r = 0; r < op_rows; ++r) {
    const uint8_t* row = p.codes.data() + r * p.code_row_bytes;
    for (size_t k = 0; k < along; ++k) {
      const uint8_t c = nibbles ? uint8_t((row[k / 2] >> (4 * (k & 1))) & 0xf) : row[k];
      const float v = nan_block[r * p.scale_cols + k / size_t(out.block_k)] ? NAN : lut[c];
      out.values[axis == 1 ? r * cols + k : k * cols + r] = v;
    }
  }
}

}  // namespace precsim

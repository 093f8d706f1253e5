#include "precsim/sim/train/operand_quant.h"

#include <fmt/format.h>

#include <stdexcept>

#include "precsim/formats/quantize.h"

namespace precsim {
namespace {

// By encoding, not by name: a custom "e4m3:nanonly" is float8_e4m3fn.
std::string mx_scheme(const Format& f) {
  if (const auto name = mx_scheme_name(f)) return std::string(*name);
  throw std::invalid_argument(fmt::format(
      "scaling mx needs an MX element format (e4m3, e5m2, e2m3, e3m2, e2m1, int8), got '{}'", f.name));
}

void add_block_stats(QuantStats* q, const BlockStats& b) {
  if (!q) return;
  q->count += b.elements;
  q->underflow_to_zero += b.flushed;
  q->saturated += b.saturated;
  q->nan += b.nonfinite_inputs;
}

}  // namespace

std::string operand_scheme(const OperandSpec& spec, int margin) {
  const Format& f = spec.fmt.format;
  const std::string m = margin ? fmt::format(":margin={}", margin) : "";
  switch (spec.scaling) {
    case Scaling::kNone: return f.name;
    case Scaling::kTensorCurrent:
    case Scaling::kTensorDelayed: return f.name + ":tensor" + m;
    case Scaling::kRowwise: return fmt::format("{}:tile{}:pow2", f.name, spec.block);
    case Scaling::kBlock2d: return fmt::format("{}:block{}:pow2", f.name, spec.block);
    case Scaling::kMx:
      return mx_scheme(f) + (spec.block != 32 ? fmt::format(":block={}", spec.block) : "") +
             (spec.mx_rule != "floor" ? ":rule=" + spec.mx_rule : "") + (spec.two_d ? ":2d" : "");
    case Scaling::kNvfp4:
      if (!same_encoding(f, format_by_name("float4_e2m1fn"))) throw std::invalid_argument("scaling nvfp4 needs element format e2m1, got '" + f.name + "'");
      return std::string("nvfp4") + (spec.two_d ? ":2d" : "") + (spec.four_over_six ? ":4over6" : "");
  }
  return f.name;
}

OperandQuantizer::OperandQuantizer(const OperandSpec& spec, int amax_history_len, int margin)
    : spec_(spec), history_len_(amax_history_len), margin_(margin) {
  if (spec.scaling != Scaling::kNone) scheme_ = parse_block_scaling(operand_scheme(spec, margin));
}

Format OperandQuantizer::apply(std::span<const float> in, std::span<float> out, size_t rows, size_t cols, int axis,
                               const SrKey& key, QuantStats* stats, std::shared_ptr<DelayedScaling>* delayed) const {
  const OperandSpec& spec = spec_;
  if (spec.scaling == Scaling::kNone) {
    QuantOptions o;
    o.rounding = spec.fmt.rounding;
    o.sr_key = key;
    quantize(spec.fmt.format, in, out, o, stats);
    return spec.fmt.format;
  }
  BlockScaling s = *scheme_;
  s.axis = axis;
  s.element_options.rounding = spec.fmt.rounding;
  s.element_options.sr_key = key;
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

}  // namespace precsim

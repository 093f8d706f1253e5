#include "quantize_f32_plan.h"

#include <bit>
#include <cfloat>
#include <cmath>

namespace precsim {
namespace {

constexpr uint32_t kQuietNan = 0x7fc00000u;  // what decode()'s NaN becomes as a float
constexpr uint32_t kInfBits = 0x7f800000u;

uint32_t pow2_bits(int e) { return std::bit_cast<uint32_t>(std::ldexp(1.0f, e)); }

}  // namespace

std::optional<F32Plan> make_f32_plan(const Format& f, const QuantOptions& o) {
  // The kernel drops bits from float32's 24-bit significand and rebuilds float32 bit patterns,
  // so every value of the format, its quantum included, must be a float32.
  if (f.man_bits > 23 || f.emin() - f.man_bits < -149 || f.max_finite() > FLT_MAX) return std::nullopt;
  if (o.rounding == Rounding::kStochastic && (o.sr_bits < 1 || o.sr_bits > 32)) return std::nullopt;
  // The P3109 rules (Inf codes of the extended formats, their saturation and stochastic modes, the
  // P = 1 parity) are in the scalar rounding only.
  const bool p3109_format = f.nonfinite == NonFinite::kFnuzInf || f.nonfinite == NonFinite::kNanInf || f.exp_parity;
  if (p3109_format || is_p3109_saturation(o.overflow) ||
      (is_stochastic(o.rounding) && o.rounding != Rounding::kStochastic))
    return std::nullopt;

  F32Plan p;
  p.rounding = o.rounding;
  p.man_bits = f.man_bits;
  p.dq = f.emin() - f.man_bits + 150;
  p.need_lead = f.emin() < -126;
  p.gap = !f.subnormals;
  p.gap_below = pow2_bits(f.emin());
  p.dq_gap = f.emin() + 150;
  p.quantum_bits = pow2_bits(f.quantum_exp());
  p.zero_bits = f.has_zero ? 0 : p.quantum_bits;
  p.zero_inexact = !f.has_zero;
  p.signed_zero = f.has_negative_zero();
  if (f.kind == FormatKind::kFloat && f.has_zero && f.subnormals) p.subnormal_below = pow2_bits(f.emin());
  p.flush = o.flush_subnormals && f.has_zero && f.kind == FormatKind::kFloat;
  p.flush_below = pow2_bits(f.emin());
  p.max_bits = std::bit_cast<uint32_t>(static_cast<float>(f.max_finite()));
  p.is_signed = f.is_signed;
  p.nan_in_bits = f.has_nan() ? kQuietNan : p.max_bits;

  const bool ieee = o.overflow == Overflow::kIeee;
  p.overflow_nonfinite = ieee && (f.has_inf() || f.has_nan());
  p.overflow_bits = f.has_inf() ? kInfBits : kQuietNan;
  p.overflow_signed = f.has_inf();
  p.overflow_is_nan = !f.has_inf();
  p.overflow_result_signed = !p.overflow_nonfinite || p.overflow_signed;

  if (ieee && f.has_inf()) {
    p.inf_bits = kInfBits;
    p.inf_signed = true;
  } else if (ieee && f.has_nan()) {
    p.inf_bits = kQuietNan;
    p.inf_is_nan = true;
  } else {
    p.inf_bits = p.max_bits;
    p.inf_signed = true;
    p.inf_saturates = true;
  }
  const int k = o.rounding == Rounding::kStochastic ? o.sr_bits : 32;
  p.sr_mask = k == 32 ? ~0u : ~((1u << (32 - k)) - 1);
  p.fixed_drop = !p.need_lead && f.man_bits >= 1 && f.man_bits <= 22 && f.has_zero &&
                 f.quantum_exp() + 24 <= 127;
  p.often_small = f.emin() >= -10;
  p.sr_small_float = p.fixed_drop && f.quantum_exp() >= -126 && f.quantum_exp() <= 0;
  if (p.sr_small_float) {
    p.quantum = std::ldexp(1.0f, f.quantum_exp());
    p.inv_quantum = std::ldexp(1.0f, -f.quantum_exp());
  }
  if (p.fixed_drop) p.magic = std::ldexp(1.0f, f.quantum_exp() + 23);
  return p;
}

}  // namespace precsim

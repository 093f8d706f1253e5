#include "precsim/formats/rounding.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

constexpr uint64_t kHalf = uint64_t{1} << 63;

uint64_t mantissa_mask(const Format& f) { return (uint64_t{1} << f.man_bits) - 1; }
uint64_t field_all_ones(const Format& f) { return (uint64_t{1} << f.exp_bits) - 1; }

// Attaches the sign to a magnitude code: a sign bit for floats, two's complement for integers.
uint64_t with_sign(const Format& f, bool negative, uint64_t mag) {
  if (!negative || !f.is_signed) return mag;
  if (f.kind == FormatKind::kInt) return (~mag + 1) & f.code_mask();
  return mag | f.sign_mask();
}

Rounded zero_result(const Format& f, bool negative, uint32_t status) {
  // E8M0 has no zero: the smallest scale, 2^-127, is not an underflow to zero.
  if (!f.has_zero) return {0, (status & ~uint32_t{kUnderflowToZero}) | kInexact};
  return {with_sign(f, negative && f.has_negative_zero(), 0), status};
}

// P3109 v4.0 §4.7.5 for a rounded value outside [Mlo, Mhi], or an infinite one. `negative` in an
// unsigned format means a non-zero value below Mlo = 0. Extended means the format has Inf.
Rounded p3109_saturate(const Format& f, bool negative, bool infinite, const QuantOptions& o, uint32_t status) {
  const Overflow sat = o.overflow;
  const Rounding r = o.rounding;
  // A negative value into an unsigned format did not overflow: it is clamped to 0 or invalid.
  const bool unsigned_negative = negative && !f.is_signed;
  if (!infinite && !unsigned_negative) status |= kOverflow | kInexact;
  const Rounded inf{f.has_inf() ? inf_code(f, negative) : 0, status};
  const Rounded clamp{unsigned_negative ? 0 : max_code(f, negative), status | kSaturated | (infinite ? 0u : kInexact)};
  // Whether SatNone keeps a finite out-of-range value finite: the rounding points toward zero.
  const bool finite_direction = r == Rounding::kTowardZero || (!negative && r == Rounding::kDown) ||
                                (negative && r == Rounding::kUp) ||
                                (!negative && r == Rounding::kOdd && !f.is_signed && f.has_inf());
  if (unsigned_negative) {
    if (sat != Overflow::kSatNone || (!infinite && finite_direction)) return clamp;
    return {nan_code(f), status | kInvalid | kNanResult};
  }
  if (sat == Overflow::kSatFinite || !f.has_inf()) return clamp;
  if (infinite) return inf;  // SatPropagate and SatNone keep Inf in extended formats
  if (sat == Overflow::kSatPropagate || finite_direction) return clamp;
  return inf;
}

Rounded overflow_result(const Format& f, bool negative, const QuantOptions& o, uint32_t status) {
  if (is_p3109_saturation(o.overflow)) return p3109_saturate(f, negative, false, o, status);
  status |= kOverflow | kInexact;
  const bool away = o.rounding == Rounding::kNearestEven || o.rounding == Rounding::kNearestAway ||
                    is_stochastic(o.rounding) || (o.rounding == Rounding::kUp && !negative) ||
                    (o.rounding == Rounding::kDown && negative);
  if (o.overflow == Overflow::kIeee && away) {
    if (f.has_inf()) return {inf_code(f, negative), status};
    // The NaN keeps the sign of the value that overflowed, as cuda_fp8.h (__NV_NOSAT), ml_dtypes
    // and PyTorch do for E4M3FN: -465 gives 0xff.
    if (f.has_nan()) return {with_sign(f, negative, nan_code(f)), status | kNanResult};
  }
  return {max_code(f, negative), status | kSaturated};
}

// P3109 §4.7.4 RoundAway of the stochastic variants: n random bits `rnd`, the discarded fraction
// frac (top-aligned) with `lost` set when non-zero bits lie below it.
bool p3109_stochastic_up(Rounding mode, int n, uint64_t frac, bool lost, uint64_t rnd) {
  const uint64_t full = uint64_t{1} << n;
  const uint64_t a = frac >> (64 - n);  // floor(v * 2^N)
  if (mode == Rounding::kStochasticA) return a + rnd >= full;
  if (mode == Rounding::kStochasticB) return (frac >> (63 - n)) + 2 * rnd + 1 >= 2 * full;
  const bool half = (frac >> (63 - n)) & 1;
  const bool below_half = (frac << (n + 1)) != 0 || lost;
  const uint64_t rnite = a + (half && (below_half || (a & 1)) ? 1 : 0);
  return rnite + rnd >= full;
}

// Whether rounding the discarded part goes up by one unit in the last kept place.
// frac: the discarded bits aligned to the top of 64 bits; lost: non-zero bits below those;
// kept_odd: whether the truncated code is odd (its last mantissa bit, or see Format::exp_parity).
bool round_up(const QuantOptions& o, bool negative, bool kept_odd, uint64_t frac, bool lost, uint32_t random_bits) {
  const bool inexact = frac != 0 || lost;
  switch (o.rounding) {
    case Rounding::kNearestEven: return frac > kHalf || (frac == kHalf && (lost || kept_odd));
    case Rounding::kNearestAway: return frac >= kHalf;
    case Rounding::kTowardZero: return false;
    case Rounding::kUp: return inexact && !negative;
    case Rounding::kDown: return inexact && negative;
    case Rounding::kOdd: return inexact && !kept_odd;
    case Rounding::kStochastic: {
      const int k = o.sr_bits;
      return (frac >> (64 - k)) > (uint64_t{random_bits} >> (32 - k));
    }
    case Rounding::kStochasticA:
    case Rounding::kStochasticB:
    case Rounding::kStochasticC:
      return p3109_stochastic_up(o.rounding, o.sr_bits, frac, lost, uint64_t{random_bits} >> (32 - o.sr_bits));
  }
  return false;
}

}  // namespace

uint64_t nan_code(const Format& f) {
  switch (f.nonfinite) {
    case NonFinite::kIeee: return (field_all_ones(f) << f.man_bits) | (uint64_t{1} << (f.man_bits - 1));
    case NonFinite::kNanOnly: return (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
    case NonFinite::kFnuz:
    case NonFinite::kFnuzInf: return f.sign_mask();
    case NonFinite::kNanInf: return (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
    case NonFinite::kFiniteOnly: break;
  }
  return max_code(f, false);  // no NaN: callers flag kInvalid
}

uint64_t inf_code(const Format& f, bool negative) {
  const uint64_t all = (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
  if (f.nonfinite == NonFinite::kFnuzInf) return with_sign(f, negative, all);
  if (f.nonfinite == NonFinite::kNanInf) return all - 1;
  return with_sign(f, negative, field_all_ones(f) << f.man_bits);
}

uint64_t max_code(const Format& f, bool negative) {
  return with_sign(f, negative, f.max_finite_code());
}

bool is_nan_code(const Format& f, uint64_t code) {
  const uint64_t mag = code & ~f.sign_mask() & f.code_mask();
  switch (f.nonfinite) {
    case NonFinite::kIeee:
      return (mag >> f.man_bits) == field_all_ones(f) && (mag & mantissa_mask(f)) != 0;
    case NonFinite::kNanOnly: return mag == (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
    case NonFinite::kFnuz:
    case NonFinite::kFnuzInf: return (code & f.code_mask()) == f.sign_mask();
    case NonFinite::kNanInf: return mag == (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
    case NonFinite::kFiniteOnly: return false;
  }
  return false;
}

bool is_inf_code(const Format& f, uint64_t code) {
  const uint64_t mag = code & ~f.sign_mask() & f.code_mask();
  if (!f.has_inf()) return false;
  if (f.nonfinite == NonFinite::kIeee) return mag == field_all_ones(f) << f.man_bits;
  return mag == (inf_code(f, false) & ~f.sign_mask());
}

Rounded round_exact(const Format& f, const Exact& x, const QuantOptions& o, uint32_t random_bits) {
  assert(x.sig != 0 || !x.sticky);
  // P3109 saturation rounds a negative value first and only then judges it (§4.7.3): one that
  // rounds to zero is zero, and the rest are saturated by p3109_saturate.
  const bool p3109 = is_p3109_saturation(o.overflow);
  if (x.negative && !f.is_signed && !p3109 && (x.sig != 0 || x.sticky)) {
    return {nan_code(f), kInvalid | (f.has_nan() ? kNanResult : 0u)};
  }
  if (x.sig == 0) return zero_result(f, x.negative, kOk);

  // 1. Normalise: the leading one at bit 63, so the value lies in [2^e_top, 2^(e_top+1)).
  const int lz = std::countl_zero(x.sig);
  const uint64_t sig = x.sig << lz;
  const int exp = x.exp - lz;
  const int e_top = exp + 63;
  // Integers have no subnormals: their "normal range" starts at 2^(bits-1), above every value.
  const bool is_float = f.kind == FormatKind::kFloat;
  if (o.flush_subnormals && is_float && f.has_zero && e_top < f.emin()) {
    return zero_result(f, x.negative, kInexact | kUnderflowToZero);
  }

  // 2. The quantum of the result: 2^(e_top - m) in the normal range; below it, the subnormal
  // spacing 2^(emin - m), or without subnormals 2^emin (the only neighbours are 0 and 2^emin).
  const int m = f.man_bits;
  const bool gap_below_normal = !f.subnormals && e_top < f.emin();
  const int q = gap_below_normal ? f.emin()
                 : f.subnormals   ? std::max(e_top - m, f.quantum_exp())
                                  : e_top - m;
  const int s = q - exp;  // bits to discard, >= 11

  // 3. Split into kept bits and the discarded fraction (aligned to the top of 64 bits).
  uint64_t kept = 0, frac = 0;
  bool lost = x.sticky;
  if (s < 64) {
    kept = sig >> s;
    frac = sig << (64 - s);
  } else if (s == 64) {
    frac = sig;
  } else if (s < 128) {
    frac = sig >> (s - 64);
    lost = lost || (sig << (128 - s)) != 0;
  } else {
    lost = true;
  }
  const bool inexact = frac != 0 || lost;
  uint32_t status = inexact ? kInexact : kOk;

  // 4. Round. Without mantissa bits and with exp_parity, the code's parity is its exponent's.
  const bool parity_of_exp = f.exp_parity && m == 0;
  const bool kept_odd = parity_of_exp ? kept != 0 && ((int64_t{q} + f.bias) & 1) : (kept & 1) != 0;
  // Round to odd sets the last bit; with exp_parity the next code up is the odd one (kept + 1).
  if (o.rounding == Rounding::kOdd && !parity_of_exp)
    kept |= inexact ? 1 : 0;
  else
    kept += round_up(o, x.negative, kept_odd, frac, lost, random_bits) ? 1 : 0;

  // 5. Renormalise and pack.
  int qe = q;
  if (kept == 0) return zero_result(f, x.negative, status | kUnderflowToZero);
  if (kept >> (m + 1)) {  // carry out of the top bit (kept was all ones)
    kept >>= 1;
    ++qe;
  }
  if (gap_below_normal && kept < (uint64_t{1} << m)) {
    // No subnormals: a non-zero result below the normal range can only be 2^emin.
    kept <<= m;
    qe -= m;
  }
  uint64_t field = 0, mant = kept;
  if (kept >> m) {
    const int64_t fe = int64_t{qe} + m + f.bias;
    if (fe > int64_t(f.max_finite_code() >> m)) return overflow_result(f, x.negative, o, status);
    field = static_cast<uint64_t>(fe);
    mant = kept & mantissa_mask(f);
  } else if (f.kind == FormatKind::kFloat) {
    status |= kSubnormalResult;
  }
  const uint64_t mag = (field << m) | mant;
  if (mag > f.max_finite_code()) return overflow_result(f, x.negative, o, status);
  if (p3109 && x.negative && !f.is_signed) return p3109_saturate(f, true, false, o, status);
  return {with_sign(f, x.negative, mag), status};
}

Rounded encode(const Format& f, double v, const QuantOptions& o, uint64_t index) {
  if (std::isnan(v)) {
    return f.has_nan() ? Rounded{nan_code(f), kNanResult} : Rounded{max_code(f, false), kInvalid};
  }
  const bool neg = std::signbit(v);
  if (std::isinf(v) && is_p3109_saturation(o.overflow)) return p3109_saturate(f, neg, true, o, kOk);
  if (std::isinf(v)) {
    if (neg && !f.is_signed) return {nan_code(f), kInvalid | (f.has_nan() ? kNanResult : 0u)};
    if (o.overflow == Overflow::kIeee && f.has_inf()) return {inf_code(f, neg), kOk};
    if (o.overflow == Overflow::kIeee && f.has_nan()) return {with_sign(f, neg, nan_code(f)), kNanResult};
    return {max_code(f, neg), kSaturated};
  }
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  Exact x;
  x.negative = neg;
  x.sig = bits & ((uint64_t{1} << 52) - 1);
  if (field != 0) x.sig |= uint64_t{1} << 52;
  x.exp = (field == 0 ? 1 : field) - 1075;
  const uint32_t r = is_stochastic(o.rounding) ? sr_bits(o.sr_key, index) : 0;
  return round_exact(f, x, o, r);
}

double decode(const Format& f, uint64_t code) {
  code &= f.code_mask();
  if (f.kind == FormatKind::kInt) {
    const int64_t v = (code & f.sign_mask()) ? int64_t(code) - int64_t(f.code_mask()) - 1 : int64_t(code);
    return static_cast<double>(v);
  }
  if (is_nan_code(f, code)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = (code & f.sign_mask()) != 0;
  const double sign = neg ? -1.0 : 1.0;
  if (is_inf_code(f, code)) return sign * std::numeric_limits<double>::infinity();
  const uint64_t mag = code & ~f.sign_mask();
  const uint64_t field = mag >> f.man_bits;
  const uint64_t mant = mag & mantissa_mask(f);
  if (field == 0 && f.has_zero) {
    if (!f.subnormals) return sign * 0.0;
    return sign * std::ldexp(static_cast<double>(mant), f.emin() - f.man_bits);
  }
  const double sig = static_cast<double>((uint64_t{1} << f.man_bits) | mant);
  return sign * std::ldexp(sig, static_cast<int>(field) - f.bias - f.man_bits);
}

double round_to(const Format& f, double x, const QuantOptions& o, uint32_t* status, uint64_t index) {
  const Rounded r = encode(f, x, o, index);
  if (status) *status = r.status;
  return decode(f, r.code);
}

CodeFields split_code(const Format& f, uint64_t code) {
  code &= f.code_mask();
  if (f.kind == FormatKind::kInt) return {uint32_t((code & f.sign_mask()) != 0), 0, code};
  const uint64_t mag = code & ~f.sign_mask();
  return {uint32_t((code & f.sign_mask()) != 0), mag >> f.man_bits, mag & mantissa_mask(f)};
}

int64_t ordinal(const Format& f, uint64_t code) {
  code &= f.code_mask();
  bool neg;
  uint64_t mag;
  if (f.kind == FormatKind::kInt) {
    const double v = decode(f, code);
    neg = v < 0;
    mag = static_cast<uint64_t>(std::fabs(v));
  } else {
    neg = (code & f.sign_mask()) != 0;
    mag = code & ~f.sign_mask();
    if (!f.subnormals && f.has_zero && f.man_bits > 0 && (mag >> f.man_bits) != 0) {
      mag -= mantissa_mask(f);  // the unused field-0 codes are not values
    }
  }
  return neg ? -int64_t(mag) : int64_t(mag);
}

}  // namespace precsim

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

Rounded overflow_result(const Format& f, bool negative, const QuantOptions& o, uint32_t status) {
  status |= kOverflow | kInexact;
  const bool away = o.rounding == Rounding::kNearestEven || o.rounding == Rounding::kNearestAway ||
                    o.rounding == Rounding::kStochastic ||
                    (o.rounding == Rounding::kUp && !negative) ||
                    (o.rounding == Rounding::kDown && negative);
  if (o.overflow == Overflow::kIeee && away) {
    if (f.has_inf()) return {inf_code(f, negative), status};
    // The NaN keeps the sign of the value that overflowed, as cuda_fp8.h (__NV_NOSAT), ml_dtypes
    // and PyTorch do for E4M3FN: -465 gives 0xff.
    if (f.has_nan()) return {with_sign(f, negative, nan_code(f)), status | kNanResult};
  }
  return {max_code(f, negative), status | kSaturated};
}

// Whether rounding the discarded part goes up by one unit in the last kept place.
// frac: the discarded bits aligned to the top of 64 bits; lost: non-zero bits below those.
bool round_up(const QuantOptions& o, bool negative, uint64_t kept, uint64_t frac, bool lost,
              uint32_t random_bits) {
  const bool inexact = frac != 0 || lost;
  switch (o.rounding) {
    case Rounding::kNearestEven: return frac > kHalf || (frac == kHalf && (lost || (kept & 1)));
    case Rounding::kNearestAway: return frac >= kHalf;
    case Rounding::kTowardZero: return false;
    case Rounding::kUp: return inexact && !negative;
    case Rounding::kDown: return inexact && negative;
    case Rounding::kOdd: return false;
    case Rounding::kStochastic: {
      const int k = o.sr_bits;
      return (frac >> (64 - k)) > (uint64_t{random_bits} >> (32 - k));
    }
  }
  return false;
}

}  // namespace

uint64_t nan_code(const Format& f) {
  switch (f.nonfinite) {
    case NonFinite::kIeee: return (field_all_ones(f) << f.man_bits) | (uint64_t{1} << (f.man_bits - 1));
    case NonFinite::kNanOnly: return (uint64_t{1} << (f.exp_bits + f.man_bits)) - 1;
    case NonFinite::kFnuz: return f.sign_mask();
    case NonFinite::kFiniteOnly: break;
  }
  return max_code(f, false);  // no NaN: callers flag kInvalid
}

uint64_t inf_code(const Format& f, bool negative) {
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
    case NonFinite::kFnuz: return (code & f.code_mask()) == f.sign_mask();
    case NonFinite::kFiniteOnly: return false;
  }
  return false;
}

bool is_inf_code(const Format& f, uint64_t code) {
  const uint64_t mag = code & ~f.sign_mask() & f.code_mask();
  return f.has_inf() && mag == field_all_ones(f) << f.man_bits;
}

Rounded round_exact(const Format& f, const Exact& x, const QuantOptions& o, uint32_t random_bits) {
  assert(x.sig != 0 || !x.sticky);
  if (x.negative && !f.is_signed && (x.sig != 0 || x.sticky)) {
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

  // 4. Round.
  kept += round_up(o, x.negative, kept, frac, lost, random_bits) ? 1 : 0;
  if (o.rounding == Rounding::kOdd && inexact) kept |= 1;

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
  return {with_sign(f, x.negative, mag), status};
}

Rounded encode(const Format& f, double v, const QuantOptions& o, uint64_t index) {
  if (std::isnan(v)) {
    return f.has_nan() ? Rounded{nan_code(f), kNanResult} : Rounded{max_code(f, false), kInvalid};
  }
  const bool neg = std::signbit(v);
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
  const uint32_t r = o.rounding == Rounding::kStochastic ? sr_bits(o.sr_key, index) : 0;
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

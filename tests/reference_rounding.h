// An oracle for rounding into formats of 16 bits or fewer, written from the field definitions and
// not from precsim's decode/encode: the list of a format's values, and the choice between the two
// neighbours of x by mode, decided with exact arithmetic (Boost.Multiprecision).
// Tests include it; it is header-only and heavy (Boost), so it stays out of library headers.
#pragma once

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim::reference {

// 332 bits: x - a for neighbours a <= x < b of a <=16-bit format spans at most ~70 bits.
using Big = boost::multiprecision::cpp_bin_float_100;

struct Value {
  double v;      // non-negative
  uint64_t mag;  // magnitude code (no sign)
};

// Every non-negative finite value of f with its magnitude code, ascending, from the field
// definitions: subnormal mant*2^(1-bias-m), normal (2^m+mant)*2^(field-bias-m).
inline std::vector<Value> positive_values(const Format& f) {
  std::vector<Value> out;
  const int m = f.man_bits;
  const uint64_t mags = uint64_t{1} << (f.exp_bits + m);
  if (f.kind == FormatKind::kInt) {
    for (uint64_t c = 0; c < mags; ++c) out.push_back({double(c), c});
    return out;
  }
  const uint64_t all_ones_field = (uint64_t{1} << f.exp_bits) - 1;
  for (uint64_t c = 0; c < mags; ++c) {
    const uint64_t field = c >> m, mant = c & ((uint64_t{1} << m) - 1);
    if (f.nonfinite == NonFinite::kIeee && field == all_ones_field) continue;
    if (f.nonfinite == NonFinite::kNanOnly && c == mags - 1) continue;
    double v;
    if (field == 0 && f.has_zero) {
      if (!f.subnormals && mant != 0) continue;  // not a value: field 0 is only zero
      v = std::ldexp(double(mant), 1 - f.bias - m);
    } else {
      v = std::ldexp(double((uint64_t{1} << m) | mant), int(field) - f.bias - m);
    }
    out.push_back({v, c});
  }
  return out;
}

inline bool is_away(Rounding r, bool negative) {
  return r == Rounding::kNearestEven || r == Rounding::kNearestAway || r == Rounding::kStochastic ||
         (r == Rounding::kUp && !negative) || (r == Rounding::kDown && negative);
}

// The canonical NaN the project writes: IEEE all-ones exponent with the quiet bit, the all-ones
// code for nan-only, the negative-zero code for fnuz. Formats without NaN give +max (as CUDA's
// FP6/FP4 conversions do).
inline uint64_t expected_nan(const Format& f, const std::vector<Value>& vals) {
  const int w = f.exp_bits + f.man_bits;
  switch (f.nonfinite) {
    case NonFinite::kIeee: return (((uint64_t{1} << f.exp_bits) - 1) << f.man_bits) | (uint64_t{1} << (f.man_bits - 1));
    case NonFinite::kNanOnly: return (uint64_t{1} << w) - 1;
    case NonFinite::kFnuz:
    case NonFinite::kFnuzInf: return uint64_t{1} << w;
    case NonFinite::kNanInf: return (uint64_t{1} << w) - 1;
    case NonFinite::kFiniteOnly: break;
  }
  return vals.back().mag;
}

inline uint64_t signed_code(const Format& f, bool negative, uint64_t mag) {
  if (!negative || !f.is_signed) return mag;
  const int w = f.exp_bits + f.man_bits;
  const uint64_t mask = (uint64_t{1} << (w + 1)) - 1;
  if (f.kind == FormatKind::kInt) return (~mag + 1) & mask;
  if (mag == 0 && f.nonfinite == NonFinite::kFnuz) return 0;  // no -0: its code is the NaN
  return mag | (uint64_t{1} << w);
}

// Integral significand of a value in units of its quantum; zero is even.
inline uint64_t significand(const Format& f, double v) {
  if (v == 0) return 0;
  // Every non-zero value of a format without subnormals is normal, so one formula serves all.
  const int q = std::max(std::ilogb(v) - f.man_bits, f.kind == FormatKind::kInt ? 0 : f.emin() - f.man_bits);
  return static_cast<uint64_t>(std::ldexp(v, -q));
}

struct Expected {
  uint64_t code;
  bool overflow = false;  // the rounded value, with unbounded exponent, exceeds the largest finite
};

// The code of x in f under o, `random` being the 32 stochastic bits (their top o.sr_bits are used:
// up when floor(frac * 2^k) > r). Definitions the project documents:
// - ties to even pick the even significand; in a format with no mantissa (e8m0) both neighbours
//   have significand 1 and the tie goes up, as bit-level RNE and ml_dtypes do;
// - round-to-odd picks the odd significand, the lower one when both are odd (no mantissa);
// - overflow (the rounded value is beyond the largest finite): Inf, or NaN with the sign of x
//   (E4M3FN: -465 -> 0xff) without Inf, where the
//   mode rounds away from zero and o.overflow is IEEE; the largest finite otherwise;
// - a format without zero (e8m0) gives its smallest value below it; negative values into an
//   unsigned format give NaN; flush_subnormals zeroes |x| < 2^emin before rounding (floats only).
inline Expected round_reference(const Format& f, const std::vector<Value>& vals, double x,
                                const QuantOptions& o, uint32_t random) {
  const bool neg = std::signbit(x);
  const uint64_t max_mag = vals.back().mag;
  if (std::isnan(x)) return {expected_nan(f, vals)};
  if (neg && !f.is_signed && x != 0) return {expected_nan(f, vals)};
  const double ax = std::fabs(x);
  const double max_v = vals.back().v;
  auto overflowed = [&]() -> Expected {
    if (o.overflow == Overflow::kIeee && is_away(o.rounding, neg) && f.has_inf())
      return {signed_code(f, neg, ((uint64_t{1} << f.exp_bits) - 1) << f.man_bits), true};
    if (o.overflow == Overflow::kIeee && is_away(o.rounding, neg) && f.has_nan())
      return {signed_code(f, neg, expected_nan(f, vals)), true};
    return {signed_code(f, neg, max_mag), true};
  };
  if (std::isinf(x)) {  // exact: mode-independent
    if (o.overflow == Overflow::kIeee && f.has_inf())
      return {signed_code(f, neg, ((uint64_t{1} << f.exp_bits) - 1) << f.man_bits)};
    if (o.overflow == Overflow::kIeee && f.has_nan()) return {signed_code(f, neg, expected_nan(f, vals))};
    return {signed_code(f, neg, max_mag)};
  }
  if (o.flush_subnormals && f.kind == FormatKind::kFloat && f.has_zero && ax < std::ldexp(1.0, f.emin()))
    return {signed_code(f, neg, 0)};
  if (!f.has_zero && ax < vals.front().v) return {vals.front().mag};

  // Neighbours a <= ax <= b; beyond the largest finite, b is the next value of an unbounded
  // exponent range.
  Value a, b;
  const int top_q = f.kind == FormatKind::kInt ? 0 : std::ilogb(max_v) - f.man_bits;
  const double virtual_next = max_v + std::ldexp(1.0, top_q);
  bool b_virtual = false;
  if (ax >= max_v) {
    if (ax == max_v) return {signed_code(f, neg, max_mag)};
    if (ax >= virtual_next) {
      const bool toward_zero = o.rounding == Rounding::kTowardZero || o.rounding == Rounding::kOdd ||
                               (o.rounding == Rounding::kUp && neg) || (o.rounding == Rounding::kDown && !neg);
      return toward_zero ? Expected{signed_code(f, neg, max_mag), true} : overflowed();
    }
    a = vals.back();
    b = {virtual_next, 0};
    b_virtual = true;
  } else {
    auto it = std::upper_bound(vals.begin(), vals.end(), ax, [](double v, const Value& e) { return v < e.v; });
    b = *it;
    a = *(it - 1);
    if (a.v == ax) return {signed_code(f, neg, a.mag)};
  }
  const Big bx(ax), ba(a.v), bb(b.v);
  const Big below = bx - ba, above = bb - bx;
  const uint64_t sa = significand(f, a.v), sb = b_virtual ? (significand(f, max_v) + 1) : significand(f, b.v);
  bool up = false;
  switch (o.rounding) {
    case Rounding::kNearestEven:
      up = above < below || (above == below && ((sb % 2 == 0 && sa % 2 == 1) || (sa % 2 == 1 && sb % 2 == 1)));
      break;
    case Rounding::kNearestAway: up = above <= below; break;
    case Rounding::kTowardZero: up = false; break;
    case Rounding::kUp: up = !neg; break;
    case Rounding::kDown: up = neg; break;
    case Rounding::kOdd: up = sa % 2 == 0; break;
    case Rounding::kStochastic: {
      const int k = o.sr_bits;
      const Big scaled = boost::multiprecision::ldexp(below / (bb - ba), k);
      const uint64_t frac_k = static_cast<uint64_t>(boost::multiprecision::floor(scaled));
      up = frac_k > (uint64_t{random} >> (32 - k));
      break;
    }
    // The P3109 variants are checked against p3109_reference.h (p3109_rules_test), not here.
    case Rounding::kStochasticA:
    case Rounding::kStochasticB:
    case Rounding::kStochasticC:
      throw std::logic_error("reference_rounding: P3109 stochastic rounding is not modelled");
  }
  if (!up) return {signed_code(f, neg, a.mag)};
  if (b_virtual) return overflowed();
  return {signed_code(f, neg, b.mag)};
}

// Float32 bit patterns within `ulps` float32 ulps of every value of each format and of every
// midpoint between neighbours (the rounding boundaries), both signs, plus zeros, Inf, NaNs, the
// float32 extremes. For differential tests against other implementations.
inline std::vector<uint32_t> float32_boundary_patterns(const std::vector<std::string>& formats, int ulps = 3) {
  std::vector<uint32_t> out;
  for (const auto& name : formats) {
    const auto vals = positive_values(format_by_name(name));
    for (size_t i = 0; i < vals.size(); ++i) {
      const double next = i + 1 < vals.size() ? vals[i + 1].v : 2 * vals[i].v;
      for (const double p : {vals[i].v, vals[i].v + (next - vals[i].v) / 2}) {
        const float pf = static_cast<float>(p);
        if (static_cast<double>(pf) != p || pf == 0) continue;
        const uint32_t b = std::bit_cast<uint32_t>(pf);
        for (int d = -ulps; d <= ulps; ++d) {
          out.push_back(b + static_cast<uint32_t>(d));
          out.push_back((b + static_cast<uint32_t>(d)) | 0x80000000u);
        }
      }
    }
  }
  for (const uint32_t special : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0x7fffffffu, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu})
    out.push_back(special);
  return out;
}

}  // namespace precsim::reference

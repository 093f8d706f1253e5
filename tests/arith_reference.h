// Oracle for in-format arithmetic, written from the format's field definitions and IEEE 754, not
// from precsim's unpack/round_exact: operands are decoded to exact dyadics n * 2^e (Boost cpp_int),
// the exact result (a dyadic, a quotient of dyadics, or the square root of a dyadic) is placed
// between its two neighbours on the format's grid with exact integer comparisons, and the neighbour
// is chosen by the mode. Any format of up to 64 bits; header-only and heavy (Boost).
#pragma once

#include <boost/multiprecision/cpp_int.hpp>
#include <stdexcept>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim::arith_ref {

using boost::multiprecision::cpp_int;

struct Result {
  uint64_t code = 0;
  uint32_t status = 0;
  friend bool operator==(const Result&, const Result&) = default;
};

inline int floor_log2(const cpp_int& n) { return int(boost::multiprecision::msb(n)); }  // n > 0

// A decoded code; finite values are n * 2^e with n > 0.
struct Val {
  enum Kind { kZero, kFinite, kInf, kNan } kind = kZero;
  bool neg = false;
  cpp_int n;
  int e = 0;
};

// The format as its designers define it: field widths, bias and which codes are special.
class Grid {
 public:
  explicit Grid(const Format& f) : f(f) {
    const uint64_t c = max_mag_code();
    max_ = decode_uncached(c, false);
    if (width() <= 16) {
      for (bool daz : {false, true}) {
        cache_[daz].reserve(uint64_t{1} << width());
        for (uint64_t x = 0; x < (uint64_t{1} << width()); ++x) cache_[daz].push_back(decode_uncached(x, daz));
      }
    }
  }
  const Format& f;

  bool is_int() const { return f.kind == FormatKind::kInt; }
  int width() const { return (f.is_signed ? 1 : 0) + f.exp_bits + f.man_bits; }
  uint64_t sign_bit() const { return f.is_signed ? uint64_t{1} << (f.exp_bits + f.man_bits) : 0; }
  uint64_t mag_codes() const { return uint64_t{1} << (f.exp_bits + f.man_bits); }
  uint64_t all_ones_field() const { return (uint64_t{1} << f.exp_bits) - 1; }
  // Exponent of the lowest normal binade: the field-1 binade, or field 0 for formats without zero.
  int emin() const { return f.has_zero ? 1 - f.bias : -f.bias; }
  bool negative_zero() const {
    return !is_int() && f.is_signed && f.has_zero && f.nonfinite != NonFinite::kFnuz;
  }
  const Val& max_value() const { return max_; }
  uint64_t max_mag_code() const {
    if (is_int()) return mag_codes() - 1;
    switch (f.nonfinite) {
      case NonFinite::kIeee: return (all_ones_field() << f.man_bits) - 1;
      case NonFinite::kNanOnly: return mag_codes() - 2;
      default: return mag_codes() - 1;
    }
  }
  uint64_t nan() const {  // the canonical NaN; formats without one answer their largest value
    switch (f.nonfinite) {
      case NonFinite::kIeee: return (all_ones_field() << f.man_bits) | (uint64_t{1} << (f.man_bits - 1));
      case NonFinite::kNanOnly: return mag_codes() - 1;
      case NonFinite::kFnuz: return sign_bit();
      case NonFinite::kFiniteOnly: break;
      // The P3109 extended formats are checked against p3109_reference.h, not this oracle.
      case NonFinite::kFnuzInf:
      case NonFinite::kNanInf: throw std::logic_error("arith_reference: P3109 extended formats are not modelled");
    }
    return max_mag_code();
  }
  uint64_t inf(bool neg) const { return (all_ones_field() << f.man_bits) | (neg ? sign_bit() : 0); }
  uint64_t with_sign(bool neg, uint64_t mag) const {
    if (!neg) return mag;
    if (is_int()) return (mag_codes() * 2 - mag) & (mag_codes() * 2 - 1);
    return mag | sign_bit();
  }

  Val decode(uint64_t code, bool daz) const {
    code &= width() == 64 ? ~uint64_t{0} : (uint64_t{1} << width()) - 1;
    if (!cache_[daz].empty()) return cache_[daz][code];
    return decode_uncached(code, daz);
  }

  // The code of the positive value n * 2^e, known to lie on the grid.
  uint64_t encode_mag(const cpp_int& n, int e) const {
    if (is_int()) return uint64_t(cpp_int(n << e));
    const int m = f.man_bits;
    const int eb = floor_log2(n) + e;  // floor(log2 value)
    const int unit = eb < emin() ? emin() - m : eb - m;
    const int s = e - unit;  // value / 2^unit = n * 2^s, an integer
    const uint64_t sig = uint64_t(s >= 0 ? cpp_int(n << s) : cpp_int(n >> -s));
    if (eb < emin()) return sig;
    return (uint64_t(eb + f.bias) << m) | (sig - (uint64_t{1} << m));
  }

 private:
  Val max_;
  std::vector<Val> cache_[2];

  Val decode_uncached(uint64_t code, bool daz) const {
    Val v;
    if (is_int()) {
      const bool neg = code >= mag_codes();
      const int64_t x = neg ? int64_t(code) - int64_t(2 * mag_codes()) : int64_t(code);
      if (x == 0) return v;
      return {Val::kFinite, neg, cpp_int(neg ? -x : x), 0};
    }
    const int m = f.man_bits;
    v.neg = (code & sign_bit()) != 0;
    const uint64_t mag = code & (mag_codes() - 1);
    const uint64_t field = mag >> m, mant = mag & ((uint64_t{1} << m) - 1);
    switch (f.nonfinite) {
      case NonFinite::kIeee:
        if (field == all_ones_field()) return {mant ? Val::kNan : Val::kInf, mant ? false : v.neg, 0, 0};
        break;
      case NonFinite::kNanOnly:
        if (mag == mag_codes() - 1) return {Val::kNan, false, 0, 0};
        break;
      case NonFinite::kFnuz:
        if (code == sign_bit()) return {Val::kNan, false, 0, 0};
        break;
      case NonFinite::kFiniteOnly: break;
      case NonFinite::kFnuzInf:
      case NonFinite::kNanInf: throw std::logic_error("arith_reference: P3109 extended formats are not modelled");
    }
    if (field == 0 && f.has_zero) {
      if (mant == 0 || !f.subnormals || daz) return {Val::kZero, v.neg && negative_zero(), 0, 0};
      return {Val::kFinite, v.neg, cpp_int(mant), emin() - m};
    }
    return {Val::kFinite, v.neg, cpp_int((uint64_t{1} << m) | mant), int(field) - f.bias - m};
  }
};

// An exact positive magnitude: n * 2^e, or (n * 2^e) / (d * 2^de), or sqrt(n * 2^e). Only
// integer operations, so the comparisons are exact and fast.
class Exact {
 public:
  static Exact dyadic(cpp_int n, int e) { return Exact(kDyadic, std::move(n), e, 1, 0); }
  static Exact quotient(cpp_int n, int e, cpp_int d, int de) {
    return Exact(kQuotient, std::move(n), e, std::move(d), de);
  }
  static Exact sqrt_of(cpp_int n, int e) { return Exact(kSqrt, std::move(n), e, 1, 0); }

  // floor(x / 2^qe)
  cpp_int floor_scaled(int qe) const {
    switch (kind_) {
      case kDyadic: return scaled(n_, e_ - qe);
      case kQuotient: return shifted(n_, e_ - de_ - qe, d_);
      case kSqrt: return boost::multiprecision::sqrt(scaled(n_, e_ - 2 * qe));
    }
    return 0;
  }
  // sign of x - k * 2^qe, for k >= 0
  int compare(const cpp_int& k, int qe) const {
    switch (kind_) {
      case kDyadic: return cmp_scaled(n_, e_, k, qe);
      case kQuotient: return cmp_scaled(n_, e_, k * d_, qe + de_);
      case kSqrt: return cmp_scaled(n_, e_, k * k, 2 * qe);
    }
    return 0;
  }
  int floor_log2() const {
    switch (kind_) {
      case kDyadic: return arith_ref::floor_log2(n_) + e_;
      case kQuotient: {
        const int e = arith_ref::floor_log2(n_) - arith_ref::floor_log2(d_) + e_ - de_;
        return compare(1, e) < 0 ? e - 1 : e;
      }
      case kSqrt: {
        const int e = arith_ref::floor_log2(n_) + e_;
        return e >= 0 ? e / 2 : -((-e + 1) / 2);  // floor(e / 2)
      }
    }
    return 0;
  }

 private:
  enum Kind { kDyadic, kQuotient, kSqrt } kind_;
  cpp_int n_, d_;
  int e_, de_;
  Exact(Kind k, cpp_int n, int e, cpp_int d, int de)
      : kind_(k), n_(std::move(n)), d_(std::move(d)), e_(e), de_(de) {}
  static cpp_int scaled(const cpp_int& n, int s) {  // floor(n * 2^s)
    return s >= 0 ? cpp_int(n << s) : cpp_int(n >> -s);
  }
  static cpp_int shifted(const cpp_int& n, int s, const cpp_int& d) {  // floor(n * 2^s / d)
    return s >= 0 ? cpp_int((n << s) / d) : cpp_int(n / (d << -s));
  }
  static int cmp_scaled(const cpp_int& a, int ea, const cpp_int& b, int eb) {  // a*2^ea vs b*2^eb
    const int lo = std::min(ea, eb);
    const cpp_int x = a << (ea - lo), y = b << (eb - lo);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
};

inline bool rounds_away_on_overflow(Rounding r, bool neg) {
  return r == Rounding::kNearestEven || r == Rounding::kNearestAway || r == Rounding::kStochastic ||
         (r == Rounding::kUp && !neg) || (r == Rounding::kDown && neg);
}

inline Result zero(const Grid& g, bool neg, uint32_t status) {
  // E8M0 has no zero: it answers its smallest value, 2^-127, which is not an underflow to zero.
  if (!g.f.has_zero) return {0, (status & ~uint32_t{kUnderflowToZero}) | kInexact};
  return {g.with_sign(neg && g.negative_zero(), 0), status};
}
inline Result invalid(const Grid& g) {
  return {g.nan(), kInvalid | (g.f.nonfinite == NonFinite::kFiniteOnly ? 0u : uint32_t{kNanResult})};
}
inline Result nan_out(const Grid& g) { return {g.nan(), kNanResult}; }
// A value too large for the format: Inf, or a NaN carrying the sign (cuda_fp8.h), or saturation.
inline Result too_large(const Grid& g, bool neg, const QuantOptions& o, bool away, uint32_t status) {
  if (o.overflow == Overflow::kIeee && away && g.f.nonfinite != NonFinite::kFiniteOnly) {
    if (g.f.nonfinite == NonFinite::kIeee) return {g.inf(neg), status};
    return {g.with_sign(neg, g.nan()), status | kNanResult};
  }
  return {g.with_sign(neg, g.max_mag_code()), status | kSaturated};
}
// An infinite exact result, as a conversion of +-Inf under the options.
inline Result infinite(const Grid& g, bool neg, const QuantOptions& o, uint32_t extra = 0) {
  if (neg && !g.f.is_signed) return {g.nan(), invalid(g).status | extra};
  return too_large(g, neg, o, true, extra);
}

// Rounds the exact magnitude x (> 0) with sign `neg`.
inline Result round(const Grid& g, bool neg, const Exact& x, const QuantOptions& o, uint32_t r) {
  const Format& f = g.f;
  if (neg && !f.is_signed) return invalid(g);
  const int emin = g.emin();
  const int e = x.floor_log2();
  if (!g.is_int() && o.flush_subnormals && f.has_zero && e < emin) {
    return zero(g, neg, kInexact | kUnderflowToZero);
  }
  int qe;  // the grid's spacing around x is 2^qe
  if (g.is_int()) qe = 0;
  else if (e < emin && !(f.subnormals && f.has_zero)) qe = emin;  // neighbours 0 and 2^emin
  else qe = std::max(e, emin) - f.man_bits;
  const cpp_int n = x.floor_scaled(qe);
  const bool exact = x.compare(n, qe) == 0;
  bool up = false;
  switch (o.rounding) {
    case Rounding::kNearestEven: {
      const int c = x.compare(2 * n + 1, qe - 1);
      up = c > 0 || (c == 0 && (n & 1) != 0);
      break;
    }
    case Rounding::kNearestAway: up = x.compare(2 * n + 1, qe - 1) >= 0; break;
    case Rounding::kTowardZero: break;
    case Rounding::kUp: up = !exact && !neg; break;
    case Rounding::kDown: up = !exact && neg; break;
    case Rounding::kOdd: up = !exact && (n & 1) == 0; break;
    case Rounding::kStochastic: {
      const int k = o.sr_bits;
      const cpp_int t = x.floor_scaled(qe - k) - (n << k);  // discarded fraction in units of 2^-k
      up = t > cpp_int(r >> (32 - k));
      break;
    }
    case Rounding::kStochasticA:  // the P3109 variants: p3109_rules_test checks them
    case Rounding::kStochasticB:
    case Rounding::kStochasticC: throw std::logic_error("arith_reference: P3109 stochastic rounding is not modelled");
  }
  const cpp_int res = up ? cpp_int(n + 1) : n;
  uint32_t status = exact ? 0u : uint32_t{kInexact};
  if (res == 0) return zero(g, neg, status | kUnderflowToZero);
  const Val& mx = g.max_value();
  if (Exact::dyadic(res, qe).compare(mx.n, mx.e) > 0) {
    return too_large(g, neg, o, rounds_away_on_overflow(o.rounding, neg),
                     status | kOverflow | kInexact);
  }
  if (!g.is_int() && floor_log2(res) + qe < emin) status |= kSubnormalResult;
  return {g.with_sign(neg, g.encode_mag(res, qe)), status};
}

inline Result round_dyadic(const Grid& g, bool neg, const cpp_int& n, int e, const QuantOptions& o,
                           uint32_t r) {
  return round(g, neg, Exact::dyadic(n, e), o, r);
}

// Exact-zero sums: equal signs keep theirs, opposite signs give +0 (-0 rounding down).
inline bool zero_sum_sign(bool a_neg, bool b_neg, const QuantOptions& o) {
  return a_neg == b_neg ? a_neg : o.rounding == Rounding::kDown;
}

inline Result sum(const Grid& g, const Val& a, const Val& b, const QuantOptions& o, uint32_t r) {
  if (a.kind == Val::kNan || b.kind == Val::kNan) return nan_out(g);
  if (a.kind == Val::kInf && b.kind == Val::kInf && a.neg != b.neg) return invalid(g);
  if (a.kind == Val::kInf) return infinite(g, a.neg, o);
  if (b.kind == Val::kInf) return infinite(g, b.neg, o);
  if (a.kind == Val::kZero && b.kind == Val::kZero) return zero(g, zero_sum_sign(a.neg, b.neg, o), 0);
  if (a.kind == Val::kZero) return round_dyadic(g, b.neg, b.n, b.e, o, r);
  if (b.kind == Val::kZero) return round_dyadic(g, a.neg, a.n, a.e, o, r);
  const int lo = std::min(a.e, b.e);
  cpp_int s = cpp_int(a.n << (a.e - lo));
  const cpp_int t = b.n << (b.e - lo);
  if (a.neg == b.neg) return round_dyadic(g, a.neg, s + t, lo, o, r);
  if (s == t) return zero(g, o.rounding == Rounding::kDown, 0);
  return s > t ? round_dyadic(g, a.neg, s - t, lo, o, r) : round_dyadic(g, b.neg, t - s, lo, o, r);
}

// The product as a value; `bad` when it is 0 * Inf.
inline Val product(const Val& a, const Val& b, bool* bad) {
  Val p;
  p.neg = a.neg != b.neg;
  *bad = false;
  if (a.kind == Val::kInf || b.kind == Val::kInf) {
    *bad = a.kind == Val::kZero || b.kind == Val::kZero;
    p.kind = Val::kInf;
  } else if (a.kind == Val::kFinite && b.kind == Val::kFinite) {
    p.kind = Val::kFinite;
    p.n = a.n * b.n;
    p.e = a.e + b.e;
  }
  return p;
}

// The operations on codes; r is the stochastic-rounding draw.
inline Result add(const Grid& g, uint64_t a, uint64_t b, const QuantOptions& o, uint32_t r) {
  return sum(g, g.decode(a, o.flush_subnormals), g.decode(b, o.flush_subnormals), o, r);
}
inline Result sub(const Grid& g, uint64_t a, uint64_t b, const QuantOptions& o, uint32_t r) {
  Val vb = g.decode(b, o.flush_subnormals);
  vb.neg = !vb.neg;
  return sum(g, g.decode(a, o.flush_subnormals), vb, o, r);
}

inline Result mul(const Grid& g, uint64_t a, uint64_t b, const QuantOptions& o, uint32_t r) {
  const Val va = g.decode(a, o.flush_subnormals), vb = g.decode(b, o.flush_subnormals);
  if (va.kind == Val::kNan || vb.kind == Val::kNan) return nan_out(g);
  bool bad;
  const Val p = product(va, vb, &bad);
  if (bad) return invalid(g);
  if (p.kind == Val::kInf) return infinite(g, p.neg, o);
  if (p.kind == Val::kZero) return zero(g, p.neg, 0);
  return round_dyadic(g, p.neg, p.n, p.e, o, r);
}

inline Result fma(const Grid& g, uint64_t a, uint64_t b, uint64_t c, const QuantOptions& o,
                  uint32_t r) {
  const Val va = g.decode(a, o.flush_subnormals), vb = g.decode(b, o.flush_subnormals),
            vc = g.decode(c, o.flush_subnormals);
  if (va.kind == Val::kNan || vb.kind == Val::kNan || vc.kind == Val::kNan) return nan_out(g);
  bool bad;
  const Val p = product(va, vb, &bad);
  if (bad) return invalid(g);
  return sum(g, p, vc, o, r);
}

inline Result div(const Grid& g, uint64_t a, uint64_t b, const QuantOptions& o, uint32_t r) {
  const Val va = g.decode(a, o.flush_subnormals), vb = g.decode(b, o.flush_subnormals);
  if (va.kind == Val::kNan || vb.kind == Val::kNan) return nan_out(g);
  const bool neg = va.neg != vb.neg;
  if (va.kind == Val::kInf && vb.kind == Val::kInf) return invalid(g);
  if (va.kind == Val::kInf) return infinite(g, neg, o);
  if (vb.kind == Val::kInf) return zero(g, neg, 0);
  if (vb.kind == Val::kZero) return va.kind == Val::kZero ? invalid(g) : infinite(g, neg, o, kDivByZero);
  if (va.kind == Val::kZero) return zero(g, neg, 0);
  return round(g, neg, Exact::quotient(va.n, va.e, vb.n, vb.e), o, r);
}

inline Result sqrt(const Grid& g, uint64_t a, const QuantOptions& o, uint32_t r) {
  const Val va = g.decode(a, o.flush_subnormals);
  if (va.kind == Val::kNan) return nan_out(g);
  if (va.kind == Val::kZero) return zero(g, va.neg, 0);
  if (va.neg) return invalid(g);
  if (va.kind == Val::kInf) return infinite(g, false, o);
  return round(g, false, Exact::sqrt_of(va.n, va.e), o, r);
}

// Test helpers shared by the arithmetic tests.
inline constexpr Rounding kAllModes[] = {Rounding::kNearestEven, Rounding::kNearestAway,
                                         Rounding::kTowardZero,  Rounding::kUp,
                                         Rounding::kDown,        Rounding::kOdd,
                                         Rounding::kStochastic};

inline QuantOptions options(Rounding r, Overflow ov = Overflow::kIeee, bool flush = false,
                            int sr_bits = 32) {
  QuantOptions o;
  o.rounding = r;
  o.overflow = ov;
  o.flush_subnormals = flush;
  o.sr_bits = sr_bits;
  o.sr_key = SrKey{12345, 7, 3, 1};
  return o;
}

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace precsim::arith_ref

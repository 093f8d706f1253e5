// A literal transcription of the IEEE P3109 v4.0 Interim Report's internal functions (§4.7.2
// ωDecode, §4.7.4 ωRoundToPrecision, §4.7.5 ωSaturate, §4.7.6 ωEncode, composed as §4.7.3
// ωProject) on exact dyadic values n * 2^e (Boost cpp_int). It shares no code with precsim's
// rounding: the tests compare the two. `Mutation` breaks one rule on purpose, so that a test can
// show its inputs tell the rule apart (a reference with the rule broken must disagree somewhere).
#pragma once

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace p3109ref {

using boost::multiprecision::cpp_int;

struct Fmt {
  int k, p;
  bool is_signed, extended;
  int bias() const { return is_signed ? 1 << (k - p - 1) : 1 << (k - p); }
};

enum class Kind { kFinite, kPosInf, kNegInf, kNan };
struct Value {
  Kind kind = Kind::kFinite;
  cpp_int n = 0;  // value n * 2^e
  int e = 0;
};

enum class Round { kNTE, kNTA, kTP, kTN, kTZ, kOdd, kSrA, kSrB, kSrC };
enum class Sat { kFinite, kPropagate, kNone };
enum class Mutation {
  kNone,
  kSatNoneFiniteToNan,  // SatNone sends finite-format overflow to NaN (pychop's unreleased code)
  kSatPropagateClamps,  // SatPropagate clamps Inf like SatFinite
  kSatNoneIgnoresDir,   // SatNone overflows to Inf whatever the rounding direction
  kSrBWithoutHalf,      // StochasticB without the "+1" of 2R + 1
  kSrCTruncates,        // StochasticC with floor in place of RNITE (so StochasticA)
  kSrAStrict,           // StochasticA with > in place of >=
  kParityIgnoresExp,    // P = 1 CodeIsEven as IsEven(floor S~) alone
};

inline int msb(const cpp_int& a) { return int(boost::multiprecision::msb(a)); }
inline cpp_int pow2(int n) { return cpp_int(1) << n; }

// a * 2^ea compared with b * 2^eb.
inline int compare(const cpp_int& a, int ea, const cpp_int& b, int eb) {
  const int e = std::min(ea, eb);
  const cpp_int x = a << (ea - e), y = b << (eb - e);
  return x < y ? -1 : x > y ? 1 : 0;
}

inline Value from_double(double d) {
  if (std::isnan(d)) return {Kind::kNan};
  if (std::isinf(d)) return {d > 0 ? Kind::kPosInf : Kind::kNegInf};
  int e = 0;
  const double m = std::frexp(d, &e);  // d = m * 2^e, 0.5 <= |m| < 1
  const auto n = static_cast<int64_t>(std::ldexp(m, 53));
  return {Kind::kFinite, cpp_int(n), e - 53};
}

// §4.7.2.
inline Value decode(const Fmt& f, uint64_t x) {
  const uint64_t half = uint64_t{1} << (f.k - 1), all = (uint64_t{1} << f.k) - 1;
  if (f.is_signed && x == half) return {Kind::kNan};
  if (!f.is_signed && x == all) return {Kind::kNan};
  if (f.is_signed && f.extended && x == half - 1) return {Kind::kPosInf};
  if (f.is_signed && f.extended && x == all) return {Kind::kNegInf};
  if (!f.is_signed && f.extended && x == all - 1) return {Kind::kPosInf};
  if (f.is_signed && x > half) {
    Value v = decode(f, x - half);
    v.n = -v.n;
    return v;
  }
  const uint64_t t = x % (uint64_t{1} << (f.p - 1)), eb = x / (uint64_t{1} << (f.p - 1));
  const int b = f.bias();
  if (eb == 0) return {Kind::kFinite, cpp_int(t), (1 - f.p) + (1 - b)};
  return {Kind::kFinite, pow2(f.p - 1) + t, (1 - f.p) + int(eb) - b};
}

inline uint64_t max_finite_code(const Fmt& f) {
  const uint64_t half = uint64_t{1} << (f.k - 1), all = (uint64_t{1} << f.k) - 1;
  if (f.is_signed) return f.extended ? half - 2 : half - 1;
  return f.extended ? all - 2 : all - 1;
}

// §4.7.4 for finite non-zero x. `r`: the N random bits R.
inline Value round_to_precision(const Fmt& f, const Value& x, Round mode, int n_bits, uint64_t r, Mutation mu) {
  if (x.kind != Kind::kFinite || x.n == 0) return x;
  const bool neg = x.n < 0;
  const cpp_int a = neg ? cpp_int(-x.n) : x.n;
  const int b = f.bias();
  const int q = std::max(msb(a) + x.e, 1 - b) - f.p + 1;
  cpp_int fl, rem;  // S~ = fl + rem / 2^d
  int d = 0;
  if (x.e >= q) {
    fl = a << (x.e - q);
  } else {
    d = q - x.e;
    fl = a >> d;
    rem = a - (fl << d);
  }
  const cpp_int one = pow2(d);                                                // nu = rem / one
  auto floor_scaled = [&](int bits) { return cpp_int((rem << bits) >> d); };  // floor(nu * 2^bits)
  const bool nu_pos = rem != 0;
  const bool code_even = f.p > 1 || mu == Mutation::kParityIgnoresExp ? (fl % 2 == 0) : (fl == 0 || (q + b) % 2 == 0);
  const cpp_int big = pow2(n_bits);
  bool away = false;
  switch (mode) {
    case Round::kTZ: away = false; break;
    case Round::kTP: away = nu_pos && !neg; break;
    case Round::kTN: away = nu_pos && neg; break;
    case Round::kNTA: away = 2 * rem >= one; break;
    case Round::kNTE: away = 2 * rem > one || (2 * rem == one && !code_even); break;
    case Round::kOdd: away = nu_pos && code_even; break;
    case Round::kSrA:
      away = mu == Mutation::kSrAStrict ? floor_scaled(n_bits) + r > big : floor_scaled(n_bits) + r >= big;
      break;
    case Round::kSrB:
      away = floor_scaled(n_bits + 1) + 2 * cpp_int(r) + (mu == Mutation::kSrBWithoutHalf ? 0 : 1) >= 2 * big;
      break;
    case Round::kSrC: {
      const cpp_int lo = floor_scaled(n_bits);
      const cpp_int twice = (rem << (n_bits + 1)) - (lo << (d + 1));  // 2 * frac(nu * 2^N) * 2^d
      const bool up = mu != Mutation::kSrCTruncates && (twice > one || (twice == one && lo % 2 != 0));
      away = lo + (up ? 1 : 0) + r >= big;
      break;
    }
  }
  const cpp_int s = fl + (away ? 1 : 0);
  return {Kind::kFinite, neg ? cpp_int(-s) : s, q};
}

// §4.7.5, rule by rule in the report's order.
inline Value saturate(const Fmt& f, Sat sat, Round rnd, const Value& x, Mutation mu) {
  if (x.kind == Kind::kNan) return x;
  const Value hi = decode(f, max_finite_code(f));
  const Value lo = f.is_signed ? Value{Kind::kFinite, -hi.n, hi.e} : Value{Kind::kFinite, 0, 0};
  const bool fin = x.kind == Kind::kFinite;
  const bool above = x.kind == Kind::kPosInf || (fin && compare(x.n, x.e, hi.n, hi.e) > 0);
  const bool below = x.kind == Kind::kNegInf || (fin && compare(x.n, x.e, lo.n, lo.e) < 0);
  if (!above && !below) return x;
  const bool ext = f.extended, sgn = f.is_signed;
  const Value pinf{Kind::kPosInf}, ninf{Kind::kNegInf}, nan{Kind::kNan};
  if (sat == Sat::kFinite || (sat == Sat::kPropagate && mu == Mutation::kSatPropagateClamps)) return above ? hi : lo;
  if (sat == Sat::kPropagate) {
    if (x.kind == Kind::kPosInf) return ext ? pinf : hi;
    if (x.kind == Kind::kNegInf) return sgn && ext ? ninf : lo;
    return above ? hi : lo;
  }
  // SatNone.
  if (x.kind == Kind::kPosInf) return ext ? pinf : hi;
  if (x.kind == Kind::kNegInf) return sgn && ext ? ninf : !sgn ? nan : lo;
  const bool dir = mu != Mutation::kSatNoneIgnoresDir;
  if (above && dir && rnd == Round::kOdd && !sgn && ext) return hi;
  if (above && dir && (rnd == Round::kTZ || rnd == Round::kTN)) return hi;
  if (below && dir && (rnd == Round::kTZ || rnd == Round::kTP)) return lo;
  if (below && sgn && ext) return ninf;
  if (below && !sgn) return nan;
  if (below) return mu == Mutation::kSatNoneFiniteToNan ? nan : lo;
  if (above && ext) return pinf;
  return mu == Mutation::kSatNoneFiniteToNan ? nan : hi;
}

// §4.7.6.
inline uint64_t encode(const Fmt& f, const Value& x) {
  const uint64_t half = uint64_t{1} << (f.k - 1), all = (uint64_t{1} << f.k) - 1;
  if (x.kind == Kind::kNan) return f.is_signed ? half : all;
  if (x.kind == Kind::kPosInf) return f.is_signed ? half - 1 : all - 1;
  if (x.kind == Kind::kNegInf) return encode(f, {Kind::kPosInf}) + half;
  if (x.n < 0) return encode(f, {Kind::kFinite, -x.n, x.e}) + half;
  if (x.n == 0) return 0;
  const int b = f.bias();
  const int e = std::max(msb(x.n) + x.e, 1 - b);
  const cpp_int s = (x.n << (x.e - e + f.p - 1 + 2048)) >> 2048;  // X * 2^-E * 2^(P-1), an integer
  const uint64_t t = uint64_t(s % pow2(f.p - 1));
  return s < pow2(f.p - 1) ? t : t + uint64_t(e + b) * (uint64_t{1} << (f.p - 1));
}

// §4.7.3.
inline uint64_t project(const Fmt& f, const Value& x, Round rnd, Sat sat, int n_bits = 0, uint64_t r = 0,
                        Mutation mu = Mutation::kNone) {
  if (x.kind == Kind::kNan) return encode(f, x);
  return encode(f, saturate(f, sat, rnd, round_to_precision(f, x, rnd, n_bits, r, mu), mu));
}

}  // namespace p3109ref

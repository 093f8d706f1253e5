#include "precsim/formats/arith.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

using u128 = unsigned __int128;

int bit_length(u128 x) {
  const auto hi = static_cast<uint64_t>(x >> 64);
  if (hi) return 128 - std::countl_zero(hi);
  return 64 - std::countl_zero(static_cast<uint64_t>(x));
}

// Just enough of a 256-bit unsigned integer to add two aligned significands exactly: the largest
// operand is a 106-bit product, placed at the top of the frame.
struct U256 {
  u128 hi = 0, lo = 0;
};

U256 shl(u128 x, int n) {  // 0 <= n < 256, no bits may leave the frame
  if (n == 0) return {0, x};
  if (n < 128) return {x >> (128 - n), x << n};
  return {x << (n - 128), 0};
}
U256 add(U256 a, U256 b) {
  U256 r;
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi + (r.lo < a.lo ? 1 : 0);
  return r;
}
U256 sub(U256 a, U256 b) {  // a >= b
  U256 r;
  r.lo = a.lo - b.lo;
  r.hi = a.hi - b.hi - (a.lo < b.lo ? 1 : 0);
  return r;
}
bool less(U256 a, U256 b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }
bool is_zero(U256 a) { return a.hi == 0 && a.lo == 0; }
int bit_length(U256 a) { return a.hi ? 128 + bit_length(a.hi) : bit_length(a.lo); }

enum class Kind : uint8_t { kZero, kFinite, kInf, kNan };

// A decoded operand: finite values are sig * 2^exp with sig > 0.
struct Unpacked {
  Kind kind = Kind::kZero;
  bool neg = false;
  u128 sig = 0;
  int exp = 0;
};

// The field arithmetic is spelled out here rather than through is_nan_code/is_inf_code: this runs
// once per operand of every operation.
Unpacked unpack(const Format& f, uint64_t code, const QuantOptions& o) {
  const int m = f.man_bits;
  const int mag_bits = f.exp_bits + m;
  const uint64_t mag_mask = (uint64_t{1} << mag_bits) - 1;  // mag_bits <= 63
  const bool neg = f.is_signed && ((code >> mag_bits) & 1);
  const uint64_t mag = code & mag_mask;
  if (f.kind == FormatKind::kInt) {
    if (mag == 0 && !neg) return {};
    return {Kind::kFinite, neg, neg ? (mag_mask + 1) - mag : mag, 0};  // two's complement
  }
  const uint64_t field = mag >> m;
  const uint64_t mant = mag & ((uint64_t{1} << m) - 1);
  switch (f.nonfinite) {
    case NonFinite::kIeee:
      if (field == mag_mask >> m) return mant ? Unpacked{Kind::kNan} : Unpacked{Kind::kInf, neg};
      break;
    case NonFinite::kNanOnly:
      if (mag == mag_mask) return {Kind::kNan};
      break;
    case NonFinite::kFnuz:
      if (neg && mag == 0) return {Kind::kNan};
      break;
    case NonFinite::kFnuzInf:
      if (neg && mag == 0) return {Kind::kNan};
      if (mag == mag_mask) return {Kind::kInf, neg};
      break;
    case NonFinite::kNanInf:
      if (mag == mag_mask) return {Kind::kNan};
      if (mag == mag_mask - 1) return {Kind::kInf, false};
      break;
    case NonFinite::kFiniteOnly: break;
  }
  if (field == 0 && f.has_zero) {
    if (!f.subnormals || mant == 0 || o.flush_subnormals) {
      return {Kind::kZero, neg && f.has_negative_zero()};
    }
    return {Kind::kFinite, neg, mant, f.emin() - m};
  }
  return {Kind::kFinite, neg, (uint64_t{1} << m) | mant, int(field) - f.bias - m};
}

uint32_t random_bits(const QuantOptions& o, uint64_t index) {
  return is_stochastic(o.rounding) ? sr_bits(o.sr_key, index) : 0;
}

// Rounds (sig + s) * 2^exp, 0 <= s < 1, s != 0 exactly when sticky. With sticky set, sig must have
// at least 64 bits, so that the top 64 bits handed to round_exact carry every decision.
Rounded round_wide(const Format& f, bool neg, U256 sig, int exp, bool sticky, const QuantOptions& o,
                   uint64_t index) {
  const int n = bit_length(sig);
  assert(!sticky || n >= 64);
  if (n > 64) {
    const int s = n - 64;
    const U256 top = s >= 128 ? U256{0, sig.hi >> (s - 128)}
                              : U256{0, (sig.lo >> s) | (sig.hi << (128 - s))};
    sticky = sticky || less(shl(top.lo, s), sig);
    sig = top;
    exp += s;
  }
  const Exact x{neg, static_cast<uint64_t>(sig.lo), exp, sticky};
  return round_exact(f, x, o, random_bits(o, index));
}

Rounded round_wide(const Format& f, bool neg, u128 sig, int exp, bool sticky, const QuantOptions& o,
                   uint64_t index) {
  const int n = bit_length(sig);
  assert(!sticky || n >= 64);
  if (n > 64) {
    const int s = n - 64;
    sticky = sticky || (sig << (128 - s)) != 0;
    sig >>= s;
    exp += s;
  }
  const Exact x{neg, static_cast<uint64_t>(sig), exp, sticky};
  return round_exact(f, x, o, random_bits(o, index));
}

Rounded signed_zero(const Format& f, bool neg, const QuantOptions& o) {
  return round_exact(f, Exact{neg, 0, 0, false}, o, 0);
}

Rounded invalid(const Format& f) {
  return {nan_code(f), kInvalid | (f.has_nan() ? uint32_t{kNanResult} : 0u)};
}

Rounded nan_result(const Format& f) { return {nan_code(f), kNanResult}; }

// An infinite exact result, delivered as encode() delivers +-Inf.
Rounded infinite(const Format& f, bool neg, const QuantOptions& o, uint32_t extra = kOk) {
  Rounded r = encode(f, neg ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity(), o);
  r.status |= extra;
  return r;
}

// Sign of an exact zero sum of operands of opposite signs (IEEE 754 6.3).
bool cancelled_sign(const QuantOptions& o) { return o.rounding == Rounding::kDown; }

// Exact a + b of finite non-zero values (sigs below 2^107), rounded once.
Rounded sum_finite(const Format& f, Unpacked a, Unpacked b, const QuantOptions& o, uint64_t index) {
  // Common case: the operands overlap enough that both fit a 128-bit frame at the lower quantum.
  {
    const Unpacked& h = a.exp >= b.exp ? a : b;  // the coarser quantum
    const Unpacked& l = a.exp >= b.exp ? b : a;
    const int d = h.exp - l.exp;
    if (d + bit_length(h.sig) <= 127) {
      const u128 hs = h.sig << d;
      if (h.neg == l.neg) return round_wide(f, h.neg, hs + l.sig, l.exp, false, o, index);
      if (hs == l.sig) return signed_zero(f, cancelled_sign(o), o);
      return hs > l.sig ? round_wide(f, h.neg, hs - l.sig, l.exp, false, o, index)
                        : round_wide(f, l.neg, l.sig - hs, l.exp, false, o, index);
    }
  }
  // Otherwise a 256-bit frame: the operand reaching higher goes first, its top bit at bit 254.
  if (a.exp + bit_length(a.sig) < b.exp + bit_length(b.sig)) std::swap(a, b);
  const int la = bit_length(a.sig);
  const int e0 = a.exp + la - 255;  // exponent of frame bit 0
  const U256 fa = shl(a.sig, 255 - la);
  U256 fb;
  bool lost = false;  // non-zero bits of b below the frame
  const int sh = b.exp - e0;
  if (sh >= 0) {
    fb = shl(b.sig, sh);
  } else if (-sh >= 128) {
    lost = true;
  } else {
    fb = U256{0, b.sig >> -sh};
    lost = (b.sig << (128 + sh)) != 0;
  }
  // Lost bits mean b's top is more than 140 bits below a's, so a - b keeps more than 64 bits.
  if (a.neg == b.neg) return round_wide(f, a.neg, add(fa, fb), e0, lost, o, index);
  if (less(fa, fb)) return round_wide(f, b.neg, sub(fb, fa), e0, false, o, index);
  U256 d = sub(fa, fb);
  if (lost) d = sub(d, U256{0, 1});  // a - (fb + t) = (d - 1) + (1 - t), 0 < t < 1
  if (is_zero(d)) return signed_zero(f, cancelled_sign(o), o);
  return round_wide(f, a.neg, d, e0, lost, o, index);
}

// Sum of two operands neither of which is NaN, both already checked for Inf - Inf.
Rounded sum(const Format& f, const Unpacked& a, const Unpacked& b, const QuantOptions& o,
            uint64_t index) {
  if (a.kind == Kind::kInf) return infinite(f, a.neg, o);
  if (b.kind == Kind::kInf) return infinite(f, b.neg, o);
  if (a.kind == Kind::kZero && b.kind == Kind::kZero) {
    return signed_zero(f, a.neg == b.neg ? a.neg : cancelled_sign(o), o);
  }
  if (a.kind == Kind::kZero) return round_wide(f, b.neg, b.sig, b.exp, false, o, index);
  if (b.kind == Kind::kZero) return round_wide(f, a.neg, a.sig, a.exp, false, o, index);
  return sum_finite(f, a, b, o, index);
}

Rounded add_unpacked(const Format& f, const Unpacked& a, const Unpacked& b, const QuantOptions& o,
                     uint64_t index) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan) return nan_result(f);
  if (a.kind == Kind::kInf && b.kind == Kind::kInf && a.neg != b.neg) return invalid(f);
  return sum(f, a, b, o, index);
}

// The exact product, or a special value; `status` receives kInvalid for 0 * Inf.
Unpacked product(const Unpacked& a, const Unpacked& b, bool* invalid_op) {
  const bool neg = a.neg != b.neg;
  *invalid_op = false;
  if (a.kind == Kind::kInf || b.kind == Kind::kInf) {
    if (a.kind == Kind::kZero || b.kind == Kind::kZero) *invalid_op = true;
    return {Kind::kInf, neg};
  }
  if (a.kind == Kind::kZero || b.kind == Kind::kZero) return {Kind::kZero, neg};
  return {Kind::kFinite, neg, a.sig * b.sig, a.exp + b.exp};
}

// Integer square root of x >= 2^126: the result lies in [2^63, 2^64).
u128 isqrt(u128 x) {
  u128 r = static_cast<u128>(std::sqrt(static_cast<double>(x)));
  r = (r + x / r) / 2;  // the estimate is within 2^13 of the root; one Newton step and a fix-up
  while (r * r > x) --r;
  constexpr u128 kMax = ~uint64_t{0};  // (r + 1)^2 would wrap above it
  while (r < kMax && (r + 1) * (r + 1) <= x) ++r;
  return r;
}

Rounded mul_unpacked(const Format& f, const Unpacked& a, const Unpacked& b, const QuantOptions& o,
                     uint64_t index) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan) return nan_result(f);
  bool bad = false;
  const Unpacked p = product(a, b, &bad);
  if (bad) return invalid(f);
  if (p.kind == Kind::kInf) return infinite(f, p.neg, o);
  if (p.kind == Kind::kZero) return signed_zero(f, p.neg, o);
  return round_wide(f, p.neg, p.sig, p.exp, false, o, index);
}

Rounded fma_unpacked(const Format& f, const Unpacked& a, const Unpacked& b, const Unpacked& c,
                     const QuantOptions& o, uint64_t index) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan || c.kind == Kind::kNan) return nan_result(f);
  bool bad = false;
  const Unpacked p = product(a, b, &bad);
  if (bad) return invalid(f);
  return add_unpacked(f, p, c, o, index);
}

Rounded div_unpacked(const Format& f, const Unpacked& a, const Unpacked& b, const QuantOptions& o,
                     uint64_t index) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan) return nan_result(f);
  const bool neg = a.neg != b.neg;
  if (a.kind == Kind::kInf) return b.kind == Kind::kInf ? invalid(f) : infinite(f, neg, o);
  if (b.kind == Kind::kInf) return signed_zero(f, neg, o);
  if (b.kind == Kind::kZero) return a.kind == Kind::kZero ? invalid(f) : infinite(f, neg, o, kDivByZero);
  if (a.kind == Kind::kZero) return signed_zero(f, neg, o);
  // The numerator fills 128 bits, so the quotient has at least 128 - 53 bits.
  const int s = 128 - bit_length(a.sig);
  const u128 num = a.sig << s;
  const u128 q = num / b.sig;
  return round_wide(f, neg, q, a.exp - b.exp - s, num % b.sig != 0, o, index);
}

Rounded sqrt_unpacked(const Format& f, const Unpacked& a, const QuantOptions& o, uint64_t index) {
  if (a.kind == Kind::kNan) return nan_result(f);
  if (a.kind == Kind::kZero) return signed_zero(f, a.neg, o);
  if (a.neg) return invalid(f);
  if (a.kind == Kind::kInf) return infinite(f, false, o);
  // Radicand of 127 or 128 bits with an even exponent: the root has exactly 64 bits.
  int s = 128 - bit_length(a.sig);
  if ((a.exp - s) % 2 != 0) --s;
  const u128 x = a.sig << s;
  const u128 r = isqrt(x);
  return round_wide(f, false, r, (a.exp - s) / 2, r * r != x, o, index);
}

std::string describe(const Format& f) { return "format " + f.name; }

[[noreturn]] void not_a_value(const Format& f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g (%a)", v, v);
  throw std::invalid_argument(std::string("operand ") + buf + " is not a value of " + describe(f) +
                              "; round it into the format first (round_to)");
}

// A double operand as a value of f, without going through its code; throws where code_of throws.
Unpacked unpack_value(const Format& f, double v, const QuantOptions& o) {
  const bool neg = std::signbit(v);
  if (std::isnan(v)) {
    if (!f.has_nan()) not_a_value(f, v);
    return {Kind::kNan};
  }
  if (std::isinf(v)) {
    if (!f.has_inf() || (neg && !f.is_signed)) not_a_value(f, v);
    return {Kind::kInf, neg};
  }
  if (v == 0) {
    if (!f.has_zero) not_a_value(f, v);
    return {Kind::kZero, neg && f.has_negative_zero()};
  }
  if (neg && !f.is_signed) not_a_value(f, v);
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const int field = int((bits >> 52) & 0x7ff);
  uint64_t sig = (bits & ((uint64_t{1} << 52) - 1)) | (field ? uint64_t{1} << 52 : 0);
  int exp = (field ? field : 1) - 1075;
  const int tz = std::countr_zero(sig);
  sig >>= tz;
  exp += tz;
  const int top = exp + (64 - std::countl_zero(sig)) - 1;  // floor(log2 |v|)
  const int m = f.man_bits;
  if (f.kind == FormatKind::kInt) {
    if (exp < 0 || top >= m || std::fabs(v) > double(f.max_finite_code())) not_a_value(f, v);
    return {Kind::kFinite, neg, sig, exp};
  }
  if (top < f.emin()) {  // below the normal range
    if (!f.subnormals || !f.has_zero || exp < f.emin() - m) not_a_value(f, v);
    if (o.flush_subnormals) return {Kind::kZero, neg && f.has_negative_zero()};
    return {Kind::kFinite, neg, sig, exp};
  }
  if (exp < top - m) not_a_value(f, v);
  // Its magnitude code, to compare with the largest finite one.
  const int64_t fe = int64_t{top} + f.bias;
  const uint64_t mant = (sig << (m - (top - exp))) & ((uint64_t{1} << m) - 1);
  if (fe > int64_t(f.max_finite_code() >> m) ||
      ((uint64_t(fe) << m) | mant) > f.max_finite_code()) {
    not_a_value(f, v);
  }
  return {Kind::kFinite, neg, sig, exp};
}

}  // namespace

Rounded add_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& o, uint64_t index) {
  return add_unpacked(f, unpack(f, a, o), unpack(f, b, o), o, index);
}
Rounded sub_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& o, uint64_t index) {
  Unpacked nb = unpack(f, b, o);
  nb.neg = !nb.neg;
  return add_unpacked(f, unpack(f, a, o), nb, o, index);
}
Rounded mul_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& o, uint64_t index) {
  return mul_unpacked(f, unpack(f, a, o), unpack(f, b, o), o, index);
}
Rounded fma_codes(const Format& f, uint64_t a, uint64_t b, uint64_t c, const QuantOptions& o,
                  uint64_t index) {
  return fma_unpacked(f, unpack(f, a, o), unpack(f, b, o), unpack(f, c, o), o, index);
}
Rounded div_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& o, uint64_t index) {
  return div_unpacked(f, unpack(f, a, o), unpack(f, b, o), o, index);
}
Rounded sqrt_code(const Format& f, uint64_t a, const QuantOptions& o, uint64_t index) {
  return sqrt_unpacked(f, unpack(f, a, o), o, index);
}

uint64_t code_of(const Format& f, double v) {
  unpack_value(f, v, QuantOptions{});  // throws unless v is a value of f
  return encode(f, v).code;            // exact
}

namespace {

double finish(const Format& f, const Rounded& r, uint32_t* status) {
  if (status) *status = r.status;
  return decode(f, r.code);
}

}  // namespace

double add_in(const Format& f, double a, double b, const QuantOptions& o, uint32_t* status,
              uint64_t index) {
  return finish(f, add_unpacked(f, unpack_value(f, a, o), unpack_value(f, b, o), o, index), status);
}
double sub_in(const Format& f, double a, double b, const QuantOptions& o, uint32_t* status,
              uint64_t index) {
  Unpacked nb = unpack_value(f, b, o);
  nb.neg = !nb.neg;
  return finish(f, add_unpacked(f, unpack_value(f, a, o), nb, o, index), status);
}
double mul_in(const Format& f, double a, double b, const QuantOptions& o, uint32_t* status,
              uint64_t index) {
  return finish(f, mul_unpacked(f, unpack_value(f, a, o), unpack_value(f, b, o), o, index), status);
}
double div_in(const Format& f, double a, double b, const QuantOptions& o, uint32_t* status,
              uint64_t index) {
  return finish(f, div_unpacked(f, unpack_value(f, a, o), unpack_value(f, b, o), o, index), status);
}
double fma_in(const Format& f, double a, double b, double c, const QuantOptions& o,
              uint32_t* status, uint64_t index) {
  return finish(f, fma_unpacked(f, unpack_value(f, a, o), unpack_value(f, b, o),
                                unpack_value(f, c, o), o, index), status);
}
double sqrt_in(const Format& f, double a, const QuantOptions& o, uint32_t* status, uint64_t index) {
  return finish(f, sqrt_unpacked(f, unpack_value(f, a, o), o, index), status);
}

}  // namespace precsim

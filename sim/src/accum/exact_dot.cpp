#include "precsim/sim/accum/exact_dot.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace precsim {
namespace {

// |x| = mag * 2^exp with an integer mag (the significand with its implicit bit).
void split_double(double x, uint64_t& mag, int& exp) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  mag = bits & ((uint64_t{1} << 52) - 1);
  if (field != 0) mag |= uint64_t{1} << 52;
  exp = (field == 0 ? 1 : field) - 1075;
}

void split_float(float x, uint64_t& mag, int& exp) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int field = static_cast<int>((bits >> 23) & 0xff);
  mag = bits & ((uint32_t{1} << 23) - 1);
  if (field != 0) mag |= uint64_t{1} << 23;
  exp = (field == 0 ? 1 : field) - 150;
}

const Format& fp64_format() {
  static const Format f = format_by_name("fp64");
  return f;
}

}  // namespace

void LongAccumulator::add_scaled(uint64_t mag, int exp, bool negative) {
  if (mag == 0) return;
  const int offset = exp - kLsbExp;
  assert(offset >= 0);
  const int idx = offset / kDigitBits;
  const int sh = offset % kDigitBits;
  const unsigned __int128 v = static_cast<unsigned __int128>(mag) << sh;  // at most 96 bits
  const int64_t p0 = static_cast<int64_t>(static_cast<uint64_t>(v) & 0xffffffffu);
  const int64_t p1 = static_cast<int64_t>(static_cast<uint64_t>(v >> 32) & 0xffffffffu);
  const int64_t p2 = static_cast<int64_t>(static_cast<uint64_t>(v >> 64) & 0xffffffffu);
  if (negative) {
    d_[idx] -= p0;
    d_[idx + 1] -= p1;
    d_[idx + 2] -= p2;
  } else {
    d_[idx] += p0;
    d_[idx + 1] += p1;
    d_[idx + 2] += p2;
  }
  // Each digit moves by less than 2^32 per add; 2^30 adds keep it far inside int64.
  if (++pending_ >= (1u << 30)) normalize();
}

void LongAccumulator::add_product(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) {
    nan_ = true;
    return;
  }
  const bool neg = std::signbit(a) != std::signbit(b);
  if (std::isinf(a) || std::isinf(b)) {
    if (a == 0 || b == 0) {
      nan_ = true;
    } else {
      (neg ? neg_inf_ : pos_inf_) = true;
    }
    return;
  }
  uint64_t ma, mb;
  int ea, eb;
  split_float(a, ma, ea);
  split_float(b, mb, eb);
  add_scaled(ma * mb, ea + eb, neg);
}

void LongAccumulator::add(double x) {
  if (std::isnan(x)) {
    nan_ = true;
    return;
  }
  if (std::isinf(x)) {
    (x < 0 ? neg_inf_ : pos_inf_) = true;
    return;
  }
  uint64_t m;
  int e;
  split_double(x, m, e);
  add_scaled(m, e, std::signbit(x));
}

// Carries so that every digit but the top one lies in [0, 2^32); the top digit carries the sign.
void LongAccumulator::normalize() const {
  for (int i = 0; i + 1 < kDigits; ++i) {
    const int64_t carry = d_[i] >> kDigitBits;  // arithmetic shift: floor division
    d_[i] -= carry * (int64_t{1} << kDigitBits);
    d_[i + 1] += carry;
  }
  pending_ = 0;
}

int LongAccumulator::sign() const {
  normalize();
  if (d_[kDigits - 1] < 0) return -1;
  for (int i = kDigits - 1; i >= 0; --i)
    if (d_[i] != 0) return 1;
  return 0;
}

Exact LongAccumulator::exact() const {
  normalize();
  std::array<int64_t, kDigits> m = d_;
  Exact x;
  x.negative = d_[kDigits - 1] < 0;
  if (x.negative) {
    for (auto& v : m) v = -v;
    for (int i = 0; i + 1 < kDigits; ++i) {
      const int64_t carry = m[i] >> kDigitBits;
      m[i] -= carry * (int64_t{1} << kDigitBits);
      m[i + 1] += carry;
    }
  }
  int h = kDigits - 1;
  while (h >= 0 && m[h] == 0) --h;
  if (h < 0) return x;  // zero
  auto digit = [&](int i) { return i >= 0 ? static_cast<uint64_t>(m[i]) : uint64_t{0}; };
  const unsigned __int128 v = (static_cast<unsigned __int128>(digit(h)) << 64) |
                              (static_cast<unsigned __int128>(digit(h - 1)) << 32) | digit(h - 2);
  const uint64_t hi = static_cast<uint64_t>(v >> 64), lo = static_cast<uint64_t>(v);
  const int nb = hi ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(lo);  // bit length of v
  int exp = kLsbExp + kDigitBits * (h - 2);
  bool sticky = false;
  for (int i = 0; i < h - 2; ++i) sticky = sticky || m[i] != 0;
  if (nb <= 64) {
    x.sig = static_cast<uint64_t>(v);
  } else {
    const int drop = nb - 64;
    x.sig = static_cast<uint64_t>(v >> drop);
    sticky = sticky || (v & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
    exp += drop;
  }
  x.exp = exp;
  x.sticky = sticky;
  return x;
}

Rounded LongAccumulator::round(const Format& f, const QuantOptions& o) const {
  if (is_nan()) return encode(f, std::numeric_limits<double>::quiet_NaN(), o);
  if (pos_inf_ || neg_inf_) return encode(f, pos_inf_ ? INFINITY : -INFINITY, o);
  const Exact x = exact();
  if (x.sig == 0) return encode(f, 0.0, o);
  return round_exact(f, x, o, 0);
}

double LongAccumulator::to_double() const { return decode(fp64_format(), round(fp64_format()).code); }

Rounded exact_dot(std::span<const float> a, std::span<const float> b, double c, const Format& f,
                  const QuantOptions& o) {
  if (a.size() != b.size()) throw std::invalid_argument("exact_dot: a and b differ in length");
  LongAccumulator acc;
  acc.add(c);
  for (size_t i = 0; i < a.size(); ++i) acc.add_product(a[i], b[i]);
  return acc.round(f, o);
}

double exact_dot_double(std::span<const float> a, std::span<const float> b, double c) {
  return decode(fp64_format(), exact_dot(a, b, c, fp64_format()).code);
}

}  // namespace precsim

#include "precsim/sim/exact_sum.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "precsim/formats/rounding.h"

namespace precsim {

void ExactSum::add_shifted(uint64_t mag, int shift, bool negative) {
  // mag * 2^shift as a 2304-bit two's complement addend, added limb by limb with carry.
  const int li = shift / 64, bi = shift % 64;
  uint64_t parts[2] = {mag << bi, bi ? mag >> (64 - bi) : 0};
  if (!negative) {
    unsigned carry = 0;
    for (int k = li; k < kLimbs; ++k) {
      const uint64_t add = k - li < 2 ? parts[k - li] : 0;
      if (add == 0 && carry == 0 && k - li >= 2) break;
      const uint64_t s1 = limb_[k] + add;
      const unsigned c1 = s1 < add;
      const uint64_t s2 = s1 + carry;
      carry = c1 | (s2 < s1);
      limb_[k] = s2;
    }
  } else {
    unsigned borrow = 0;
    for (int k = li; k < kLimbs; ++k) {
      const uint64_t sub = k - li < 2 ? parts[k - li] : 0;
      if (sub == 0 && borrow == 0 && k - li >= 2) break;
      const uint64_t d1 = limb_[k] - sub;
      const unsigned b1 = limb_[k] < sub;
      const uint64_t d2 = d1 - borrow;
      borrow = b1 | (d1 < borrow);
      limb_[k] = d2;
    }
  }
}

void ExactSum::add(double v) {
  if (!std::isfinite(v)) throw std::invalid_argument("ExactSum: non-finite input");
  if (v == 0) return;
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  uint64_t mag = bits & ((uint64_t{1} << 52) - 1);
  if (field) mag |= uint64_t{1} << 52;
  // v = mag * 2^(max(field,1) - 1075) = mag * 2^-1074 * 2^(max(field,1) - 1)
  add_shifted(mag, (field ? field : 1) - 1, (bits >> 63) != 0);
}

void ExactSum::add_product(float a, float b) {
  add(static_cast<double>(a) * static_cast<double>(b));  // 24x24 bits: exact in double
}

bool ExactSum::is_zero() const {
  for (uint64_t l : limb_)
    if (l) return false;
  return true;
}

double ExactSum::round(const Format& f, const QuantOptions& opts) const {
  std::array<uint64_t, kLimbs> m = limb_;
  const bool negative = (m[kLimbs - 1] >> 63) != 0;
  if (negative) {  // two's complement negate
    unsigned carry = 1;
    for (auto& l : m) {
      l = ~l + carry;
      carry = carry && l == 0;
    }
  }
  int top = kLimbs - 1;
  while (top >= 0 && m[top] == 0) --top;
  if (top < 0) return 0.0;
  // The leading 64 bits become the significand; everything below is sticky.
  const int lz = std::countl_zero(m[top]);
  const int msb = top * 64 + (63 - lz);  // bit index of the leading one
  Exact x;
  x.negative = negative;
  const int low = msb - 63;  // bit index of the significand's last bit
  if (low <= 0) {
    x.sig = m[0] << (-low);
    x.exp = -1074 + low;
  } else {
    const int li = low / 64, bi = low % 64;
    x.sig = (m[li] >> bi) | (bi && li + 1 < kLimbs ? m[li + 1] << (64 - bi) : 0);
    x.exp = -1074 + low;
    bool sticky = (m[li] & ((uint64_t{1} << bi) - 1)) != 0;
    for (int k = 0; k < li && !sticky; ++k) sticky = m[k] != 0;
    x.sticky = sticky;
  }
  return decode(f, round_exact(f, x, opts, 0).code);
}

double ExactSum::to_double() const {
  static const Format fp64 = format_by_name("fp64");
  return round(fp64);
}

}  // namespace precsim

// LongAccumulator against Boost.Multiprecision rationals on sums of doubles over the whole
// exponent range: the sum must be exact before its one rounding.
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/exact_dot.h"

namespace precsim {
namespace {

using boost::multiprecision::cpp_rational;
using boost::multiprecision::cpp_int;

cpp_rational to_rational(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, |m| in [0.5, 1)
  const auto mi = static_cast<long long>(std::ldexp(m, 53));
  cpp_rational r(mi);
  e -= 53;
  if (e >= 0) r *= cpp_rational(cpp_int(1) << e);
  else r /= cpp_rational(cpp_int(1) << -e);
  return r;
}

// Round a rational to a double, nearest-even, by bisection over the doubles' ordering.
double round_rational(const cpp_rational& r) {
  // A double's value as a rational is monotone in its bit pattern for same-sign values.
  if (r == 0) return 0.0;
  const bool neg = r < 0;
  const cpp_rational a = neg ? cpp_rational(-r) : r;
  uint64_t lo = 0, hi = 0x7ff0000000000000ULL;  // [0, inf]
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    double d;
    std::memcpy(&d, &mid, 8);
    if (to_rational(d) <= a) lo = mid; else hi = mid;
  }
  double dl, dh;
  std::memcpy(&dl, &lo, 8);
  std::memcpy(&dh, &hi, 8);
  if (std::isinf(dh)) return neg ? -dl : dl;  // finite sums in this test
  const cpp_rational dlo = a - to_rational(dl), dhi = to_rational(dh) - a;
  double out = dlo < dhi ? dl : dhi < dlo ? dh : ((lo & 1) ? dh : dl);
  return neg ? -out : out;
}

TEST(LongAccumulatorRational, MatchesRationalArithmeticOnWideExponents) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> ex(-1070, 1000);
  std::uniform_real_distribution<double> mant(-1, 1);
  for (int trial = 0; trial < 200; ++trial) {
    LongAccumulator s;
    cpp_rational ref = 0;
    const int n = 1 + trial % 40;
    for (int i = 0; i < n; ++i) {
      const double v = std::ldexp(mant(rng), trial % 2 ? ex(rng) : ex(rng) % 60);
      s.add(v);
      ref += to_rational(v);
    }
    EXPECT_EQ(s.to_double(), round_rational(ref)) << "trial " << trial;
  }
}

TEST(LongAccumulatorRational, CancellationLeavesTheTinyRemainder) {
  LongAccumulator s;
  s.add(1e300);
  s.add(0x1p-1074);
  s.add(-1e300);
  EXPECT_EQ(s.to_double(), 0x1p-1074);
  LongAccumulator z;
  z.add(1.5);
  z.add(-1.5);
  EXPECT_EQ(z.sign(), 0);
  EXPECT_EQ(z.to_double(), 0.0);
}

TEST(LongAccumulatorRational, RoundsOnceIntoAnyFormat) {
  // 1 + 2^-8 + 2^-30: a double-rounding trap for bf16 (through fp32 it would tie to 1).
  LongAccumulator s;
  s.add(1.0);
  s.add(0x1p-8);
  s.add(0x1p-30);
  EXPECT_EQ(decode(format_by_name("bf16"), s.round(format_by_name("bf16")).code), 1.0 + 0x1p-7);
  EXPECT_EQ(decode(format_by_name("fp32"), s.round(format_by_name("fp32")).code), 1.0f + 0x1p-8f);
}

}  // namespace
}  // namespace precsim

// Stochastic rounding: the k-bit definition P(up) = floor(frac * 2^k) / 2^k checked exactly by
// enumerating the random bits; hit frequencies and unbiasedness through the real generator; a
// golden-bits test of the stream; and quality tests of the counter-based generator itself.
// The thresholds are 5 to 6 standard deviations; the generator is deterministic, so these tests
// never flake: they pass or fail the same way on every run.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

QuantOptions sr(int k = 32, SrKey key = {11, 0, 0, 0}) {
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  o.sr_bits = k;
  o.sr_key = key;
  return o;
}

// Exact: with every k-bit random number once, the number of round-ups is floor(frac * 2^k).
uint64_t ups_over_all_random_numbers(const Format& f, double x, int k, double lower) {
  uint64_t ups = 0;
  const QuantOptions o = sr(k);
  Exact e;
  int ex = 0;
  const double m = std::frexp(std::fabs(x), &ex);
  e.negative = x < 0;
  e.sig = static_cast<uint64_t>(std::ldexp(m, 53));
  e.exp = ex - 53;
  for (uint64_t r = 0; r < (uint64_t{1} << k); ++r) {
    const uint32_t bits = static_cast<uint32_t>(r << (32 - k));
    ups += std::fabs(decode(f, round_exact(f, e, o, bits).code)) > std::fabs(lower);
  }
  return ups;
}

TEST(StochasticRounding, FewBitProbabilitiesFollowTheFloorDefinition) {
  const Format e5m2 = format_by_name("e5m2");  // 256 and 320 are neighbours: the gap is 64
  struct Row {
    double v;
    int k;
    uint64_t ups;  // floor((v - 256) / 64 * 2^k)
  };
  const Row rows[] = {{259, 3, 0}, {259, 5, 1}, {277, 3, 2}, {288, 3, 4}, {311, 3, 6},
                      {311, 1, 1}, {319, 3, 7}, {257, 8, 4}, {300, 4, 11}, {256.5, 8, 2}};
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "v=" << r.v << " k=" << r.k);
    EXPECT_EQ(ups_over_all_random_numbers(e5m2, r.v, r.k, 256), r.ups);
    EXPECT_EQ(ups_over_all_random_numbers(e5m2, -r.v, r.k, -256), r.ups);  // symmetric in sign
  }
  // The same among subnormals (e4m3: gap 2^-9) and at the top binade (e4m3: 416..448).
  const Format e4m3 = format_by_name("e4m3");
  EXPECT_EQ(ups_over_all_random_numbers(e4m3, 0x1p-9 + 0x1p-11, 4, 0x1p-9), 4u);
  EXPECT_EQ(ups_over_all_random_numbers(e4m3, 0x1p-12, 6, 0), 8u);
  EXPECT_EQ(ups_over_all_random_numbers(e4m3, 440, 5, 416), 24u);
}

// Fraction of round-ups over n consecutive indices of the real stream.
double hit_rate(const Format& f, double x, double lower, const QuantOptions& o, uint32_t n, int* others) {
  uint32_t ups = 0;
  *others = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const Rounded r = encode(f, x, o, i);
    const double v = decode(f, r.code);
    if (v == lower) continue;
    if (std::isnan(v) || std::isinf(v) || std::fabs(v) > std::fabs(lower)) ++ups;
    else ++*others;
  }
  return double(ups) / n;
}

TEST(StochasticRounding, HitFrequenciesAtQuarterHalfThreeQuarters) {
  constexpr uint32_t kN = 40000;
  const double tol = 6 * std::sqrt(0.25 / kN);
  struct Pair {
    const char* format;
    double lo, hi;
  };
  const Pair pairs[] = {
      {"e4m3", 1.0, 1.125},                // normal
      {"e4m3", 0x1p-9, 0x2p-9},            // subnormal
      {"e4m3", 0.0, 0x1p-9},               // underflow region
      {"e4m3", 416, 448},                  // top binade
      {"e2m1", 4, 6},                      // FP4 top binade
      {"bf16", 1.0, 1.0078125},            //
      {"fp16", -2.0, -2.001953125},        // negative
      {"e8m0", 0x1p10, 0x1p11},            // powers of two
  };
  for (const Pair& p : pairs) {
    const Format f = format_by_name(p.format);
    for (const double frac : {0.25, 0.5, 0.75}) {
      const double x = p.lo + (p.hi - p.lo) * frac;
      int others = 0;
      const double rate = hit_rate(f, x, p.lo, sr(), kN, &others);
      EXPECT_EQ(others, 0) << p.format << " x=" << x << ": results outside the two neighbours";
      EXPECT_NEAR(rate, frac, tol) << p.format << " x=" << x;
    }
  }
}

TEST(StochasticRounding, AboveTheLargestFiniteOverflowsWithTheFractionsProbability) {
  // Beyond 448 the next E4M3 value of an unbounded exponent would be 480: 456 is 1/4 of the way,
  // so a quarter of the results overflow (NaN under IEEE overflow, 448 when saturating).
  constexpr uint32_t kN = 40000;
  const Format e4m3 = format_by_name("e4m3");
  int others = 0;
  EXPECT_NEAR(hit_rate(e4m3, 456, 448, sr(), kN, &others), 0.25, 6 * std::sqrt(0.1875 / kN));
  QuantOptions sat = sr();
  sat.overflow = Overflow::kSaturate;
  EXPECT_EQ(hit_rate(e4m3, 456, 448, sat, kN, &others), 0.0);
  const Format fp16 = format_by_name("fp16");  // 65504 .. 65536 (Inf)
  EXPECT_NEAR(hit_rate(fp16, 65504 + 24, 65504, sr(), kN, &others), 0.75, 6 * std::sqrt(0.1875 / kN));
}

TEST(StochasticRounding, MeanIsUnbiasedWithManyBitsAndBiasedDownByAtMostTwoToMinusK) {
  constexpr uint32_t kN = 1 << 17;
  const Format f = format_by_name("e5m2");
  for (const double x : {1.1, 3.3e-5, -700.0, 259.0, 0.0123}) {
    QuantOptions down;
    down.rounding = Rounding::kTowardZero;
    const double lo = round_to(f, x, down);
    QuantOptions away;
    away.rounding = std::signbit(x) ? Rounding::kDown : Rounding::kUp;
    const double hi = round_to(f, x, away);
    const double g = std::fabs(hi - lo), frac = std::fabs(x - lo) / g;
    for (const int k : {32, 3}) {
      long double sum = 0;
      for (uint32_t i = 0; i < kN; ++i) sum += round_to(f, x, sr(k, {5, 6, 7, 8}), nullptr, i);
      const double mean = double(sum / kN);
      const double p = k == 32 ? frac : std::floor(frac * 8) / 8;  // P(up) under k bits
      const double expected = lo + (hi - lo) * p;
      const double sd = g * std::sqrt(p * (1 - p) / kN);
      EXPECT_NEAR(mean, expected, 6 * sd + 1e-300) << "x=" << x << " k=" << k;
      if (k == 32) {
        EXPECT_NEAR(mean, x, 6 * g * 0.5 / std::sqrt(double(kN))) << "x=" << x;
      }
    }
  }
}

// Golden bits: values computed from the documented algorithm (SplitMix64 finaliser on the key,
// two keyed lowbias32 rounds on the index) by an independent Python transcription.
TEST(SrGenerator, GoldenBits) {
  const SrKey zero{0, 0, 0, 0}, key{1, 2, 3, 4};
  const uint64_t idx[] = {0, 1, 2, 3, 1000000, (uint64_t{1} << 32) + 5};
  const uint32_t want_zero[] = {0x4515dc04, 0x0e18b9f8, 0x76ba9fed, 0xbc812bcf, 0x4097d01e, 0x03b56efa};
  const uint32_t want_key[] = {0x11fdd422, 0xe4960482, 0x93aca43f, 0x867540a3, 0x292e0d12, 0xa6efa26a};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(sr_bits(zero, idx[i]), want_zero[i]) << "index " << idx[i];
    EXPECT_EQ(sr_bits(key, idx[i]), want_key[i]) << "index " << idx[i];
  }
  static_assert(sr_bits(SrKey{0, 0, 0, 0}, 0) == 0x4515dc04u, "usable at compile time");
}

TEST(SrGenerator, ArraysGiveTheSameBitsWhateverTheSplitAndThreadCount) {
  const Format f = format_by_name("e4m3");
  std::vector<float> xs(200000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.1f + 0.001f * float(i % 5000);
  const QuantOptions o = sr(32, {9, 9, 9, 9});
  std::vector<uint8_t> whole(xs.size()), parts(xs.size()), threads1(xs.size());
  encode_array(f, std::span<const float>(xs), whole.data(), o, nullptr, 1000);
  const size_t cuts[] = {0, 7, 65536, 65537, 150001, xs.size()};
  for (int c = 0; c + 1 < 6; ++c) {
    const size_t b = cuts[c], n = cuts[c + 1] - cuts[c];
    encode_array(f, std::span<const float>(xs).subspan(b, n), parts.data() + b, o, nullptr, 1000 + b);
  }
  EXPECT_EQ(whole, parts);
  omp_set_num_threads(1);
  encode_array(f, std::span<const float>(xs), threads1.data(), o, nullptr, 1000);
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_EQ(whole, threads1);
  for (size_t i = 0; i < xs.size(); i += 997) EXPECT_EQ(whole[i], encode(f, xs[i], o, 1000 + i).code);
}

// --- quality of the generator --------------------------------------------------------------

std::vector<uint32_t> stream(const SrKey& key, uint64_t start, size_t n) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = sr_bits(key, start + i);
  return v;
}

double correlation(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, size_t lag = 0) {
  const size_t n = a.size() - lag;
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i] * 0x1p-32, y = b[i + lag] * 0x1p-32;
    sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
  }
  const double cov = sab / n - (sa / n) * (sb / n);
  return cov / std::sqrt((saa / n - (sa / n) * (sa / n)) * (sbb / n - (sb / n) * (sb / n)));
}

constexpr size_t kQ = 1 << 20;
const double kCorrTol = 5.0 / std::sqrt(double(kQ));  // 5 sigma of a correlation of independent data

TEST(SrGenerator, EveryBitPositionIsBalanced) {
  for (const SrKey& key : {SrKey{0, 0, 0, 0}, SrKey{1, 2, 3, 4}}) {
    const auto s = stream(key, 0, kQ);
    for (int bit = 0; bit < 32; ++bit) {
      size_t ones = 0;
      for (const uint32_t v : s) ones += (v >> bit) & 1;
      EXPECT_NEAR(double(ones), kQ / 2.0, 5 * std::sqrt(kQ / 4.0)) << "bit " << bit;
    }
  }
}

TEST(SrGenerator, NoSerialCorrelationBetweenConsecutiveIndices) {
  const auto s = stream({3, 0, 0, 0}, 0, kQ);
  for (const size_t lag : {1, 2, 3, 64, 65536})
    EXPECT_NEAR(correlation(s, s, lag), 0.0, kCorrTol) << "lag " << lag;
  // Pairs of consecutive low bits: the four patterns equally often.
  size_t pairs[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 1 < s.size(); ++i) ++pairs[(s[i] & 1) * 2 + (s[i + 1] & 1)];
  for (const size_t c : pairs) EXPECT_NEAR(double(c), kQ / 4.0, 5 * std::sqrt(kQ * 0.1875));
}

TEST(SrGenerator, AdjacentKeysGiveUncorrelatedStreams) {
  const SrKey base{100, 200, 300, 400};
  const auto s = stream(base, 0, kQ);
  SrKey seed = base, step = base, tensor = base, role = base;
  ++seed.seed, ++step.step, ++tensor.tensor, ++role.role;
  for (const SrKey& other : {seed, step, tensor, role}) {
    const auto t = stream(other, 0, kQ);
    EXPECT_NEAR(correlation(s, t), 0.0, kCorrTol);
    size_t agree = 0;  // each bit agrees with probability 1/2
    for (size_t i = 0; i < kQ; ++i) agree += std::popcount(~(s[i] ^ t[i]));
    EXPECT_NEAR(double(agree), 16.0 * kQ, 5 * std::sqrt(8.0 * kQ));
  }
  // Above 2^32 elements the high index word feeds the key: a different, uncorrelated stream.
  EXPECT_NEAR(correlation(s, stream(base, uint64_t{1} << 32, kQ)), 0.0, kCorrTol);
  // A shifted window of the same stream is not a copy of a neighbour key's stream.
  EXPECT_NE(stream(seed, 0, 16), stream(base, 1, 16));
}

TEST(SrGenerator, TopByteChiSquare) {
  const auto s = stream({77, 1, 0, 0}, 0, kQ);
  std::vector<double> bins(256, 0);
  for (const uint32_t v : s) ++bins[v >> 24];
  double chi2 = 0;
  const double e = kQ / 256.0;
  for (const double b : bins) chi2 += (b - e) * (b - e) / e;
  // 255 degrees of freedom: mean 255, sd sqrt(510) = 22.6; 6 sd either side.
  EXPECT_GT(chi2, 255 - 6 * 22.6);
  EXPECT_LT(chi2, 255 + 6 * 22.6);
}

TEST(SrGenerator, FlippingOneIndexBitFlipsHalfTheOutputBits) {
  const SrKey key{5, 0, 0, 0};
  for (int bit = 0; bit < 32; ++bit) {
    double flips = 0;
    constexpr int kM = 20000;
    for (uint32_t i = 0; i < kM; ++i) flips += std::popcount(sr_bits(key, i * 2654435761u) ^ sr_bits(key, (i * 2654435761u) ^ (1u << bit)));
    EXPECT_NEAR(flips / kM, 16.0, 5 * std::sqrt(8.0 / kM)) << "index bit " << bit;
  }
}

}  // namespace
}  // namespace precsim

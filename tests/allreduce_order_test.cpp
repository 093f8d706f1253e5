// The simulated all-reduce element for element against references written here from NCCL's,
// PyTorch's and Horovod's orders: native float and double adds (the hardware's round-to-nearest-even
// is the oracle for FP32 and FP64 buffers) and a significand rounding for BF16/FP16 values in the
// normal range. Per-rank values differ, so that a reversed ring, a wrong chunk rotation or another
// tree fails; each test first checks that its data tells the orders apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/core/random.h"
#include "support/allreduce_config.h"
#include "precsim/sim/parallel/allreduce.h"

namespace precsim {
namespace {

using test_support::config;
using test_support::spans;

using Grads = std::vector<std::vector<float>>;
using Add = std::function<double(double, double)>;  // one hop: the exact sum rounded to the buffer

// x rounded to nearest-even with p significand bits, for x in the format's normal range (the
// tests keep their values there): scaling by a power of two is exact, nearbyint rounds ties to even.
double round_significand(double x, int p) {
  if (x == 0) return x;
  int e = 0;
  std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(x, p - e)), e - p);
}

const Add kFp32Add = [](double a, double b) { return double(float(a) + float(b)); };
const Add kFp64Add = [](double a, double b) { return a + b; };
const Add kBf16Add = [](double a, double b) { return round_significand(a + b, 8); };
const Add kFp16Add = [](double a, double b) { return round_significand(a + b, 11); };

// W ranks' distinct values, already in the buffer format for `bits` significand bits (24: FP32).
Grads distinct_gradients(int w, size_t n, uint64_t seed, int bits = 24, double mean = 0.0, double stddev = 1.0) {
  Grads g(w, std::vector<float>(n));
  for (int p = 0; p < w; ++p) {
    fill_normal(g[p], seed, 7 + p, mean, stddev);
    // Magnitudes of at least 2^-8 keep BF16/FP16 values and partial sums where round_significand
    // holds: normal, or exact multiples of 2^-18 (FP16's subnormals hold those).
    for (float& v : g[p]) v = static_cast<float>(round_significand(std::fabs(v) < 0x1p-8f ? std::copysign(0x1p-8f, v) : v, bits));
  }
  return g;
}

// NCCL's ring: W contiguous chunks [n c / W, n (c + 1) / W); chunk c starts at rank c + 1 and
// travels the ring upwards, each rank adding its own value: ((x_{c+1} + x_{c+2}) + ...) + x_c.
// `step` = -1 walks the ring the other way (the break the tests must catch).
double ring_reference(const std::vector<double>& x, size_t i, size_t n, const Add& add, int step = 1) {
  const int w = static_cast<int>(x.size());
  int c = 0;
  while (n * size_t(c + 1) / size_t(w) <= i) ++c;
  auto rank = [&](int k) { return ((c + step * k) % w + w) % w; };
  double s = x[rank(1)];
  for (int k = 2; k <= w; ++k) s = add(s, x[rank(k)]);
  return s;
}

std::vector<double> column(const Grads& g, size_t i) {
  std::vector<double> x;
  for (const auto& r : g) x.push_back(r[i]);
  return x;
}

// The test's data must make the orders differ somewhere, or a test of the order proves nothing.
size_t count_ring_direction_differences(const Grads& g, const Add& add) {
  const size_t n = g[0].size();
  size_t d = 0;
  for (size_t i = 0; i < n; ++i) d += ring_reference(column(g, i), i, n, add) != ring_reference(column(g, i), i, n, add, -1);
  return d;
}

struct RingCase {
  const char* format;
  int bits;
  Add add;
};

TEST(AllReduceOrder, RingOfFourAndEightSumsEachChunkStartingAtTheNextRank) {
  for (const RingCase& rc : {RingCase{"fp32", 24, kFp32Add}, RingCase{"bf16", 8, kBf16Add}, RingCase{"fp16", 11, kFp16Add}}) {
    for (int w : {4, 8}) {
      const size_t n = 1003;  // not a multiple of W: chunks of two lengths
      const Grads g = distinct_gradients(w, n, 11, rc.bits);
      ASSERT_GT(count_ring_direction_differences(g, rc.add), n / 20) << rc.format << " W=" << w;
      const auto r = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, rc.format));
      EXPECT_TRUE(r.ranks_identical);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(r.reduced[i], float(ring_reference(column(g, i), i, n, rc.add))) << rc.format << " W=" << w << " i=" << i;
    }
  }
}

// PyTorch's and the simulator's balanced tree over 8 ranks: ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)).
double tree8_reference(const std::vector<double>& x, const Add& add) {
  return add(add(add(x[0], x[1]), add(x[2], x[3])), add(add(x[4], x[5]), add(x[6], x[7])));
}

double left_fold(const std::vector<double>& x, const Add& add) {
  double s = x[0];
  for (size_t k = 1; k < x.size(); ++k) s = add(s, x[k]);
  return s;
}

TEST(AllReduceOrder, TreeOfEightAddsBalancedPairsAndNaiveIsALeftFold) {
  for (const RingCase& rc : {RingCase{"fp32", 24, kFp32Add}, RingCase{"bf16", 8, kBf16Add}}) {
    const size_t n = 2000;
    const Grads g = distinct_gradients(8, n, 12, rc.bits);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += tree8_reference(column(g, i), rc.add) != left_fold(column(g, i), rc.add);
    ASSERT_GT(differ, n / 20) << rc.format;
    const auto tree = allreduce(spans(g), config(8, AllReduceAlgorithm::kTree, rc.format));
    const auto naive = allreduce(spans(g), config(8, AllReduceAlgorithm::kNaive, rc.format));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(tree.reduced[i], float(tree8_reference(column(g, i), rc.add))) << rc.format << " i=" << i;
      ASSERT_EQ(naive.reduced[i], float(left_fold(column(g, i), rc.add))) << rc.format << " i=" << i;
    }
  }
}

TEST(AllReduceOrder, PostDivideDividesTheRingSumInTheBufferFormat) {
  // Horovod's average: the ring sum, then one division by W in the buffer (W = 3 and 6 round).
  for (int w : {3, 6}) {
    const size_t n = 999;
    const Grads g = distinct_gradients(w, n, 13);
    const auto r = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp32", AverageMode::kPostDivide));
    size_t inexact = 0;
    for (size_t i = 0; i < n; ++i) {
      const float sum = float(ring_reference(column(g, i), i, n, kFp32Add));
      const float want = sum / float(w);
      inexact += double(want) * w != double(sum);
      ASSERT_EQ(r.reduced[i], want) << "W=" << w << " i=" << i;
    }
    EXPECT_GT(inexact, n / 2) << "W=" << w;  // the division's rounding is exercised
  }
}

TEST(AllReduceOrder, FsdpDividesByFourBeforeAnFp16RingAndByTwoAfterItForEightWorkers) {
  // Values near 2.5e4 in FP16: the sum of 8 (about 2e5) is beyond FP16's 65504, the sum of 8
  // quarters (about 5e4) is not, so pre-dividing by 2 or not at all overflows. (A factor of 8
  // would pass here: with no values near FP16's subnormals, only the overflow side is held.)
  const int w = 8;
  const size_t n = 1000;
  const Grads g = distinct_gradients(w, n, 14, 11, 2.5e4, 1.5e3);
  const auto r = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp16", AverageMode::kFsdp));
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> quarters;
    for (const auto& row : g) quarters.push_back(double(float(row[i]) / 4.0f));  // FP32 opmath, exact
    const double sum = ring_reference(quarters, i, n, kFp16Add);
    ASSERT_LT(sum, 65504.0);
    ASSERT_EQ(r.reduced[i], float(round_significand(sum / 2.0, 11))) << "i=" << i;
  }
}

TEST(AllReduceOrder, FsdpWithThreeWorkersDividesByTwoAndThenByOneAndAHalf) {
  const int w = 3;
  const size_t n = 999;
  const Grads g = distinct_gradients(w, n, 15);
  const auto r = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp32", AverageMode::kFsdp));
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> halves;
    for (const auto& row : g) halves.push_back(row[i] / 2.0f);
    const float sum = float(ring_reference(halves, i, n, kFp32Add));
    ASSERT_EQ(r.reduced[i], sum / 1.5f) << "i=" << i;
  }
}

// An FP64 bucket: every hop an FP64 add, one rounding to FP32 at the end.
TEST(AllReduceOrder, Fp64BucketRoundsToFp32OnlyOnce) {
  for (AllReduceAlgorithm a : {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kTree, AllReduceAlgorithm::kNaive,
                               AllReduceAlgorithm::kFp32Accumulate}) {
    const int w = 8;
    const size_t n = 4001;
    const Grads g = distinct_gradients(w, n, 16);
    const auto r = allreduce(spans(g), config(w, a, "fp64"));
    size_t differs_from_fp32 = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<double> x = column(g, i);
      const double sum = a == AllReduceAlgorithm::kTree    ? tree8_reference(x, kFp64Add)
                         : a == AllReduceAlgorithm::kNaive ? left_fold(x, kFp64Add)
                                                           : ring_reference(x, i, n, kFp64Add);
      ASSERT_EQ(r.reduced[i], float(sum)) << to_string(a) << " i=" << i;
      const double fp32 = a == AllReduceAlgorithm::kTree    ? tree8_reference(x, kFp32Add)
                          : a == AllReduceAlgorithm::kNaive ? left_fold(x, kFp32Add)
                                                            : ring_reference(x, i, n, kFp32Add);
      differs_from_fp32 += float(sum) != float(fp32);
    }
    EXPECT_GT(differs_from_fp32, n / 20) << to_string(a);  // hop roundings in FP32 would show
  }
}

TEST(AllReduceOrder, Fp64BucketAveragesInFp64) {
  // DDP: g * (1/W) in FP64 (the bucket's dtype); NCCL AVG: times the FP64 1/W; post-divide: the
  // FP64 sum / W. W = 3: 1/3 is inexact in every format, so an FP32 step shows in the bits.
  const int w = 3;
  const size_t n = 999;
  const Grads g = distinct_gradients(w, n, 17);
  const auto ddp = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp64", AverageMode::kDdp));
  const auto avg = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp64", AverageMode::kNcclAvg));
  const auto post = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp64", AverageMode::kPostDivide));
  size_t fp32_premultiply_differs = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> scaled, scaled32;
    for (const auto& row : g) {
      scaled.push_back(double(row[i]) * (1.0 / 3.0));
      scaled32.push_back(row[i] * (1.0f / 3.0f));
    }
    const float want = float(ring_reference(scaled, i, n, kFp64Add));
    ASSERT_EQ(ddp.reduced[i], want) << "i=" << i;
    ASSERT_EQ(avg.reduced[i], want) << "i=" << i;
    ASSERT_EQ(post.reduced[i], float(ring_reference(column(g, i), i, n, kFp64Add) / 3.0)) << "i=" << i;
    fp32_premultiply_differs += float(ring_reference(scaled32, i, n, kFp64Add)) != want;
  }
  EXPECT_GT(fp32_premultiply_differs, 0u);
}

// The example (precsim allreduce -w 32 -f fp32,fp64 --seed 3): FP32 and FP64 buckets
// gave the same error, 1.0573e-07. The FP64 bucket's error is now the final rounding's alone,
// at most 2^-24 relative per element.
TEST(AllReduceOrder, Fp64AndFp32BucketsDifferOnThirtyTwoWorkers) {
  const int w = 32;
  Grads g(w, std::vector<float>(1 << 16));
  for (int p = 0; p < w; ++p) fill_normal(g[p], 3, static_cast<uint64_t>(p), 0.0, 1e-2);
  auto rel_err = [&](const std::vector<float>& got) {
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      LongAccumulator s;
      for (const auto& r : g) s.add(r[i]);
      const double exact = s.to_double(), d = got[i] - exact;
      num += d * d;
      den += exact * exact;
      worst = std::max(worst, std::fabs(d / exact));
    }
    return std::pair{std::sqrt(num / den), worst};
  };
  const auto [e32, w32] = rel_err(allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp32")).reduced);
  const auto [e64, w64] = rel_err(allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp64")).reduced);
  EXPECT_LE(w64, 0x1p-24);
  EXPECT_GT(w32, 0x1p-24);
  EXPECT_LT(e64, 0.5 * e32) << e64 << " vs " << e32;
}

}  // namespace
}  // namespace precsim

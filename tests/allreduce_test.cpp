// The simulated all-reduce against exact sums and hand-computed NCCL orders
// (docs/reference/sources.md, TC 4).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/parallel/allreduce.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/core/random.h"
#include "support/allreduce_config.h"

namespace precsim {
namespace {

using test_support::config;
using test_support::spans;

// Gradients already held in `fmt` (as in bf16 training), so that errors measure the reduction.
std::vector<std::vector<float>> gradients(int w, size_t n, uint64_t seed, const char* fmt = "fp32") {
  std::vector<std::vector<float>> g(w, std::vector<float>(n));
  const Format f = format_by_name(fmt);
  for (int p = 0; p < w; ++p) {
    fill_normal(g[p], seed, 100 + p, 0.0, 1e-2);
    quantize(f, g[p], g[p]);
  }
  return g;
}

// Mean over elements of result / (exact sum * factor) - 1: the averaging's relative bias.
double mean_bias(const std::vector<std::vector<float>>& g, const std::vector<float>& got, double factor) {
  double acc = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    LongAccumulator s;
    for (const auto& r : g) s.add(r[i]);
    acc += got[i] / (s.to_double() * factor) - 1.0;
  }
  return acc / static_cast<double>(got.size());
}

// Normwise relative error of `got` against the exact sum (times `factor`).
double rel_err_norm(const std::vector<std::vector<float>>& g, const std::vector<float>& got, double factor) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    LongAccumulator s;
    for (const auto& r : g) s.add(r[i]);
    const double exact = s.to_double() * factor;
    num += (got[i] - exact) * (got[i] - exact);
    den += exact * exact;
  }
  return std::sqrt(num / den);
}

TEST(AllReduce, RingSumsEachChunkInNcclOrder) {
  // W = 3, one element per chunk. Chunk c is (((x_{c+1} + x_{c+2}) + x_c)) in bf16: with
  // values {1, 2^-8, 2^-8} only chunk 0 adds the two halves first and keeps them.
  const std::vector<std::vector<float>> g = {{1, 1, 1}, {0x1p-8f, 0x1p-8f, 0x1p-8f}, {0x1p-8f, 0x1p-8f, 0x1p-8f}};
  const auto r = allreduce(spans(g), config(3, AllReduceAlgorithm::kRing, "bf16"));
  EXPECT_EQ(r.reduced, (std::vector<float>{1.0f + 0x1p-7f, 1.0f, 1.0f}));
  EXPECT_TRUE(r.ranks_identical);
  const auto naive = allreduce(spans(g), config(3, AllReduceAlgorithm::kNaive, "bf16"));
  EXPECT_EQ(naive.reduced, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  const auto tree = allreduce(spans(g), config(3, AllReduceAlgorithm::kTree, "bf16"));
  // Tree over ranks {0,1} and {2}: (1 + 2^-8) ties to 1, then + 2^-8 ties to 1.
  EXPECT_EQ(tree.reduced, (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(AllReduce, Fp64BufferIsTheLongAccumulatorRoundedPerHop) {
  const auto g = gradients(8, 4096, 1);
  const auto r = allreduce(spans(g), config(8, AllReduceAlgorithm::kRing, "fp64"));
  EXPECT_LT(rel_err_norm(g, r.reduced, 1.0), 1e-7);  // only the final FP32 cast
  EXPECT_TRUE(r.ranks_identical);
}

TEST(AllReduce, BufferFormatsAreMatchedByEncodingNotName) {
  // e11m52 is FP64 spelled as a custom format: the same buffer, the same bits.
  const auto g = gradients(8, 4096, 1);
  AllReduceConfig custom = config(8, AllReduceAlgorithm::kRing, "fp64");
  custom.buffer = format_by_name("e11m52");
  ASSERT_NE(custom.buffer.name, "fp64");
  const auto r64 = allreduce(spans(g), config(8, AllReduceAlgorithm::kRing, "fp64"));
  const auto rc = allreduce(spans(g), custom);
  EXPECT_EQ(rc.reduced, r64.reduced);
  EXPECT_TRUE(is_allreduce_buffer_format(custom.buffer));
  // Wider than FP32 but not FP64: refused, naming what is allowed.
  AllReduceConfig wide = custom;
  wide.buffer = format_by_name("e8m30");
  EXPECT_FALSE(is_allreduce_buffer_format(wide.buffer));
  EXPECT_THROW(allreduce(spans(g), wide), std::invalid_argument);
}

TEST(AllReduce, Bf16RingErrorGrowsWithWorkersAndFp32AccumulationRemovesMostOfIt) {
  double prev = 0;
  for (int w : {2, 8, 32}) {
    const auto g = gradients(w, 8192, 2, "bf16");
    const auto ring = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "bf16"));
    const auto acc = allreduce(spans(g), config(w, AllReduceAlgorithm::kFp32Accumulate, "bf16"));
    const double e_ring = rel_err_norm(g, ring.reduced, 1.0);
    const double e_acc = rel_err_norm(g, acc.reduced, 1.0);
    EXPECT_TRUE(ring.ranks_identical);
    EXPECT_GT(e_ring, prev) << "W=" << w;
    // FP32 accumulation leaves one bf16 rounding of the result.
    if (w > 2) {
      EXPECT_LT(e_acc, 0.5 * e_ring) << "W=" << w;
    }
    EXPECT_LT(e_acc, 0.003);
    prev = e_ring;
  }
}

TEST(AllReduce, NcclAvgIsBiasedForThreeWorkersInBf16) {
  // 1/3 in bf16 is 0.333984375, so NCCL's pre-multiplied average is 1.001953125 times the mean
  // on average; DDP's FP32 pre-divide is unbiased. Positive gradients keep the ratios stable.
  std::vector<std::vector<float>> g(3, std::vector<float>(1 << 15));
  for (int p = 0; p < 3; ++p)
    for (size_t i = 0; i < g[p].size(); ++i)
      g[p][i] = static_cast<float>(round_to(format_by_name("bf16"), 1.0 + uniform01(5, p, i)));
  const auto nccl = allreduce(spans(g), config(3, AllReduceAlgorithm::kRing, "bf16", AverageMode::kNcclAvg));
  const auto ddp = allreduce(spans(g), config(3, AllReduceAlgorithm::kRing, "bf16", AverageMode::kDdp));
  EXPECT_NEAR(mean_bias(g, nccl.reduced, 1.0 / 3), 0.001953125, 2.5e-4);
  EXPECT_NEAR(mean_bias(g, ddp.reduced, 1.0 / 3), 0.0, 2.5e-4);
}

TEST(AllReduce, FsdpSplitsTheDivision) {
  EXPECT_EQ(fsdp_predivide_factor(8), 4);
  EXPECT_EQ(fsdp_predivide_factor(16), 4);
  EXPECT_EQ(fsdp_predivide_factor(3), 2);
  EXPECT_EQ(fsdp_predivide_factor(1), 1);
  std::vector<std::vector<float>> g(8, std::vector<float>(16, 2.0f));
  const auto r = allreduce(spans(g), config(8, AllReduceAlgorithm::kRing, "bf16", AverageMode::kFsdp));
  for (float v : r.reduced) EXPECT_EQ(v, 2.0f);
}

TEST(AllReduce, CompressHookDividesInLowPrecisionBeforeTheSum) {
  std::vector<std::vector<float>> g(3, std::vector<float>(8, 1.0f));
  AllReduceConfig c = config(3, AllReduceAlgorithm::kRing, "fp32");
  c.hook = CompressHook::kBf16;
  // Each rank holds bf16(1/3) = 0.333984375; the ring's bf16 sums: 0.66796875 exact, then
  // 1.001953125 rounds to 1.0 (2^-9 is a quarter ulp).
  for (float v : allreduce(spans(g), c).reduced) EXPECT_EQ(v, 1.0f);
  for (auto& r : g) r.assign(8, 2.0f);  // bf16(2/3) = 0.66796875; 1.3359375; 2.00390625 -> 2.0
  for (float v : allreduce(spans(g), c).reduced) EXPECT_EQ(v, 2.0f);
  c.hook = CompressHook::kFp16;  // fp16(1/3) = 0.333251953125; 0.66650390625; 1 - 2^-12 ties to 1
  for (auto& r : g) r.assign(8, 1.0f);
  for (float v : allreduce(spans(g), c).reduced) EXPECT_EQ(v, 1.0f);
  for (auto& r : g) r.assign(8, 0.75f);  // fp16(0.25) exact: 0.75 with no error
  for (float v : allreduce(spans(g), c).reduced) EXPECT_EQ(v, 0.75f);
}

TEST(AllReduce, Fp8BufferUsesAPerTensorScale) {
  const auto g = gradients(4, 2048, 3);
  const auto r = allreduce(spans(g), config(4, AllReduceAlgorithm::kRing, "e4m3"));
  EXPECT_GT(r.scale, 1.0);
  const double e = rel_err_norm(g, r.reduced, 1.0);
  EXPECT_GT(e, 0.01);  // three mantissa bits per hop
  EXPECT_LT(e, 0.2);
}

TEST(AllReduce, EveryRoundingIsCountedAndTinyGradientsUnderflowInABf16BufferNotInFp32) {
  // FP32 subnormals k 2^-149, k in [2^12, 2^13) (about 2^-137), alternating signs: DDP's FP32
  // pre-divide by 8 leaves them non-zero (>= 2^-140), far below half of BF16's smallest subnormal
  // 2^-133, so every cast into a BF16 bucket flushes to zero.
  const int w = 8;
  const size_t n = 1000;
  std::vector<std::vector<float>> g(w, std::vector<float>(n));
  for (int p = 0; p < w; ++p)
    for (size_t i = 0; i < n; ++i)
      g[p][i] = std::ldexp(float((i * 7 + size_t(p) * 13) % 4096 + 4096), -149) * (i % 2 ? -1.0f : 1.0f);
  const uint64_t wn = uint64_t(w) * n, hops = uint64_t(w - 1) * n;
  const auto bf = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "bf16", AverageMode::kDdp));
  // W n FP32 pre-divides (inexact, never zero), W n casts into the bucket (all flushed), (W - 1) n
  // adds of zeros (exact, zero inputs).
  EXPECT_EQ(bf.stats.count, 2 * wn + hops);
  EXPECT_EQ(bf.stats.underflow_to_zero, wn);
  EXPECT_EQ(bf.nonzero_inputs, 2 * wn);
  for (float v : bf.reduced) EXPECT_EQ(v, 0.0f);
  // An FP32 bucket holds the pre-divided values: no casts, nothing flushed, the mean survives.
  const auto f32 = allreduce(spans(g), config(w, AllReduceAlgorithm::kRing, "fp32", AverageMode::kDdp));
  EXPECT_EQ(f32.stats.count, wn + hops);
  EXPECT_EQ(f32.stats.underflow_to_zero, 0u);
  EXPECT_GT(f32.stats.subnormal, 0u);
  EXPECT_LT(rel_err_norm(g, f32.reduced, 1.0 / w), 1e-3);
}

TEST(AllReduce, BadInputIsRefused) {
  const auto g = gradients(2, 8, 4);
  EXPECT_THROW(allreduce(spans(g), config(3, AllReduceAlgorithm::kRing, "bf16")), std::invalid_argument);
  EXPECT_THROW(allreduce(spans(g), config(2, AllReduceAlgorithm::kRing, "int8")), std::invalid_argument);
  EXPECT_THROW(parse_allreduce_algorithm("butterfly"), std::invalid_argument);
  EXPECT_THROW(parse_average_mode("mean"), std::invalid_argument);
  auto bad = g;
  bad[1][3] = NAN;
  EXPECT_THROW(allreduce(spans(bad), config(2, AllReduceAlgorithm::kRing, "bf16")), std::invalid_argument);
}

}  // namespace
}  // namespace precsim

// FP8 scaling recipes: per-tensor current scaling, per-row, 1x128 tiles, 128x128 blocks, FP32 or
// power-of-two scales (docs/reference/sources.md §3.3, §3.4, §4.1), against a second implementation
// written here from those rules with cuda_fp8.h's host conversions doing the rounding; and
// Transformer Engine's delayed scaling (§3.2).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

struct Fp8 {
  __nv_fp8_interpretation_t kind;
  float max;
};
constexpr Fp8 kE4m3{__NV_E4M3, 448.0f};
constexpr Fp8 kE5m2{__NV_E5M2, 57344.0f};

float cast(const Fp8& f, float v) {
  const __nv_fp8_storage_t c = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, f.kind);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, f.kind)));
}

// Blocks of br x bc over a rows x cols array (0 = whole extent).
std::vector<float> reference(const Fp8& f, const std::vector<float>& x, size_t rows, size_t cols, size_t br,
                             size_t bc, bool pow2) {
  br = br ? br : rows, bc = bc ? bc : cols;
  std::vector<float> out(x.size());
  for (size_t rb = 0; rb < rows; rb += br)
    for (size_t cb = 0; cb < cols; cb += bc) {
      float amax = 0;
      for (size_t i = rb; i < std::min(rows, rb + br); ++i)
        for (size_t j = cb; j < std::min(cols, cb + bc); ++j) amax = std::max(amax, std::fabs(x[i * cols + j]));
      float scale = amax > 0 ? f.max / amax : 1.0f;
      if (pow2) {
        int e;
        std::frexp(scale, &e);
        scale = std::ldexp(1.0f, e - 1);
      }
      const float inv = 1.0f / scale;
      for (size_t i = rb; i < std::min(rows, rb + br); ++i)
        for (size_t j = cb; j < std::min(cols, cb + bc); ++j)
          out[i * cols + j] = cast(f, x[i * cols + j] * scale) * inv;
    }
  return out;
}

std::vector<float> data(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  fill_normal(x, seed, 5);
  for (size_t i = 0; i < n; i += 211) x[i] *= 300;  // outliers
  for (size_t i = 0; i < std::min<size_t>(n, 300); ++i) x[i] *= 1e-6f;
  return x;
}

TEST(Fp8Scaling, GranularitiesMatchTheRecipeRules) {
  const size_t rows = 200, cols = 300;
  const auto x = data(rows * cols, 1);
  struct Case {
    const char* scheme;
    Fp8 f;
    size_t br1, bc1;  // blocks for axis 1 (row-major view)
    bool pow2;
  };
  const Case cases[] = {
      {"fp8_e4m3:tensor", kE4m3, 0, 0, false},   {"fp8_e5m2:tensor", kE5m2, 0, 0, false},
      {"fp8_e4m3:row", kE4m3, 1, 0, false},      {"fp8_e4m3:tile128", kE4m3, 1, 128, false},
      {"fp8_e4m3:block128", kE4m3, 128, 128, false}, {"fp8_e4m3:tile128:pow2", kE4m3, 1, 128, true},
      {"fp8_e5m2:row:pow2", kE5m2, 1, 0, true},
  };
  for (const Case& c : cases) {
    for (int axis : {1, 0}) {
      BlockScaling s = parse_block_scaling(c.scheme);
      s.axis = axis;
      std::vector<float> q(x.size());
      block_fake_quantize(s, x, q, rows, cols);
      // Axis 0 blocks are axis 1 blocks of the transpose.
      const size_t br = axis == 1 ? c.br1 : c.bc1, bc = axis == 1 ? c.bc1 : c.br1;
      const auto ref = reference(c.f, x, rows, cols, br, bc, c.pow2);
      size_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += q[i] != ref[i];
      EXPECT_EQ(bad, 0u) << c.scheme << " axis " << axis;
    }
  }
}

TEST(Fp8Scaling, PerTensorWorkedValues) {
  // amax 100: scale = 4.48; 100 -> 448 -> 448 / 4.48 (FP32 reciprocal) ~ 100.
  const std::vector<float> x = {100.0f, -50.0f, 1.0f, 0.0f};
  BlockStats st;
  std::vector<float> q(4);
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor"), x, q, 1, 4, &st);
  const float scale = 448.0f / 100.0f, inv = 1.0f / scale;
  EXPECT_EQ(q[0], 448.0f * inv);
  EXPECT_EQ(q[1], -224.0f * inv);
  EXPECT_EQ(q[2], 4.5f * inv);  // 4.48 -> 4.5
  EXPECT_EQ(q[3], 0.0f);
  EXPECT_EQ(st.clipped_blocks, 0u);
  EXPECT_EQ(st.scale_log2_histogram.at(-3), 1u);  // 1 / 4.48 = 0.223 -> 2^-3
  // pow2: 4.48 rounds down to 4; 100 * 4 = 400 -> 384 -> 96.
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor:pow2"), x, q, 1, 4);
  EXPECT_EQ(q[0], 96.0f);
  // margin 1 halves the scale: 100 * 2.24 = 224 exactly.
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor:margin=1"), x, q, 1, 4);
  EXPECT_EQ(q[0], 224.0f * (1.0f / (224.0f / 100.0f)));
}

TEST(Fp8Scaling, AmaxEdgeCases) {
  // All zeros: scale 1. amax below eps is raised to eps (torchao EPS = 1e-12).
  std::vector<float> z = {0.0f, -0.0f}, q(2);
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor"), z, q, 1, 2);
  EXPECT_EQ(q[0], 0.0f);
  EXPECT_TRUE(std::signbit(q[1]));
  const std::vector<float> tiny = {1e-20f};
  std::vector<float> qt(1);
  BlockStats st;
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor:eps=1e-12"), tiny, qt, 1, 1, &st);
  EXPECT_EQ(qt[0], 0.0f);  // 1e-20 * 448e12 = 4.48e-6, below E4M3's 2^-9
  EXPECT_EQ(st.flushed, 1u);
  // An infinite scale (448 / 1e-45) becomes FLT_MAX.
  const BlockPacked p = block_quantize(parse_block_scaling("fp8_e4m3:tensor"), std::vector<float>{1e-45f}, 1, 1);
  float dec;
  std::memcpy(&dec, p.scales.data(), 4);
  EXPECT_EQ(dec, 1.0f / FLT_MAX);
  // Inf in the tensor: amax is not finite -> scale 1 and the Inf saturates; NaN stays NaN.
  const std::vector<float> inf = {INFINITY, 3.0f, NAN};
  std::vector<float> qi(3);
  block_fake_quantize(parse_block_scaling("fp8_e4m3:tensor"), inf, qi, 1, 3);
  EXPECT_EQ(qi[0], 448.0f);
  EXPECT_EQ(qi[1], 3.0f);
  EXPECT_TRUE(std::isnan(qi[2]));
}

TEST(DelayedScalingTest, HistoryWindowAlgoMarginAndEdgeCases) {
  DelayedScaling d(448.0, 3, DelayedScaling::Algo::kMax);
  EXPECT_EQ(d.scale(), 1.0f);
  d.update(10);
  EXPECT_EQ(d.scale(), 44.8f);
  d.update(2);
  EXPECT_EQ(d.scale(), 44.8f);  // max over {2, 10}
  d.update(4);
  EXPECT_EQ(d.scale(), 44.8f);  // {4, 2, 10}
  d.update(1);
  EXPECT_EQ(d.scale(), 112.0f);  // 10 left the window of 3: {1, 4, 2}
  EXPECT_EQ(d.history(), (std::vector<float>{1, 4, 2}));
  d.update(0);  // window {0, 1, 4}: amax 4
  EXPECT_EQ(d.scale(), 112.0f);
  DelayedScaling r(448.0, 3, DelayedScaling::Algo::kMostRecent, 2);
  r.update(7);
  EXPECT_EQ(r.scale(), 16.0f);  // 448 / 4 / 7
  r.update(0);                  // zero: keep the previous scale
  EXPECT_EQ(r.scale(), 16.0f);
  r.update(INFINITY);           // not finite: keep
  EXPECT_EQ(r.scale(), 16.0f);
  r.update(1e-45f);             // infinite scale -> FLT_MAX
  EXPECT_EQ(r.scale(), FLT_MAX);
  EXPECT_THROW(DelayedScaling(448.0, 0), std::invalid_argument);
}

TEST(DelayedScalingTest, StaleScaleSaturatesGrowingValues) {
  // Scale from an earlier amax of 10; the new tensor reaches 40: values beyond 448/44.8 = 10 clip.
  DelayedScaling d(448.0, 4);
  d.update(10);
  const BlockScaling s = parse_block_scaling("fp8_e4m3:tensor");
  const std::vector<float> x = {40.0f, 5.0f, -20.0f};
  std::vector<float> q(3);
  BlockStats st;
  fake_quantize_with_scale(s, d.scale(), x, q, &st);
  const float inv = 1.0f / 44.8f;
  EXPECT_EQ(q[0], 448.0f * inv);
  EXPECT_EQ(q[1], 224.0f * inv);
  EXPECT_EQ(q[2], -448.0f * inv);
  EXPECT_EQ(st.saturated, 2u);
  EXPECT_EQ(st.clipped_blocks, 1u);
  EXPECT_THROW(fake_quantize_with_scale(parse_block_scaling("fp8_e4m3:row"), 1.0f, x, q), std::invalid_argument);
}

}  // namespace
}  // namespace precsim

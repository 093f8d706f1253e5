// NVFP4 (E2M1 elements, E4M3 scale per 16 elements, FP32 tensor scale) against a second
// implementation written from the NVFP4 paper's Appendix B procedure (docs/reference/sources.md §1.7)
// with the CUDA headers' host conversions (cuda_fp8.h, cuda_fp4.h) doing every rounding.
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

float fp8_value(__nv_fp8_storage_t c) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3))); }
float fp4_value(__nv_fp4_storage_t c) { return __half2float(__half(__nv_cvt_fp4_to_halfraw(c, __NV_E2M1))); }

struct Ref {
  std::vector<float> values;
  std::vector<uint8_t> scale_codes;  // block order for axis 1
  std::vector<uint8_t> elem_codes;   // row-major, one per element
  float s_dec = 1;
};

// Blocks of 1 x 16 along rows, or 16 x 16 with two_d.
Ref reference(const std::vector<float>& x, size_t rows, size_t cols, bool two_d) {
  float t = 0;
  for (float v : x) t = std::max(t, std::fabs(v));
  const float s_enc = t > 0 ? 6.0f * 448.0f / t : 1.0f;
  const float s_dec = 1.0f / s_enc;
  const size_t br = two_d ? 16 : 1;
  Ref r;
  r.s_dec = s_dec;
  r.values.resize(x.size());
  r.elem_codes.resize(x.size());
  for (size_t rb = 0; rb < rows; rb += br)
    for (size_t cb = 0; cb < cols; cb += 16) {
      float amax = 0;
      for (size_t i = rb; i < std::min(rows, rb + br); ++i)
        for (size_t j = cb; j < std::min(cols, cb + 16); ++j) amax = std::max(amax, std::fabs(x[i * cols + j]));
      const float s_dec_b = amax / 6.0f;
      const __nv_fp8_storage_t sc = __nv_cvt_float_to_fp8(s_dec_b * s_enc, __NV_SATFINITE, __NV_E4M3);
      r.scale_codes.push_back(sc);
      const float sv = fp8_value(sc);
      const float s_enc_b = sv == 0 ? 0.0f : 1.0f / (sv * s_dec);
      for (size_t i = rb; i < std::min(rows, rb + br); ++i)
        for (size_t j = cb; j < std::min(cols, cb + 16); ++j) {
          const size_t k = i * cols + j;
          const __nv_fp4_storage_t qc = __nv_cvt_float_to_fp4(x[k] * s_enc_b, __NV_E2M1, cudaRoundNearest);
          r.elem_codes[k] = qc;
          r.values[k] = static_cast<float>(static_cast<double>(fp4_value(qc)) * sv * s_dec);
          if (sv == 0) r.values[k] = std::copysign(0.0f, fp4_value(qc));
        }
    }
  return r;
}

std::vector<float> test_tensor(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  fill_normal(x, seed, 3);
  for (size_t i = 0; i < n; i += 97) x[i] *= 40;  // outliers spread the block scales
  for (size_t i = 5; i < 16; ++i) x[i] *= 1e-4f;   // a block of tiny values next to a big one
  return x;
}

TEST(Nvfp4, MatchesPaperProcedureWithCudaConversions) {
  for (bool two_d : {false, true}) {
    const size_t rows = 48, cols = 80;
    const auto x = test_tensor(rows * cols, two_d ? 2 : 1);
    const Ref ref = reference(x, rows, cols, two_d);
    const BlockScaling s = parse_block_scaling(two_d ? "nvfp4:2d" : "nvfp4");
    std::vector<float> q(x.size());
    block_fake_quantize(s, x, q, rows, cols);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(q[i], ref.values[i]) << "element " << i << " x " << x[i];
    const BlockPacked p = block_quantize(s, x, rows, cols);
    EXPECT_EQ(p.scales, ref.scale_codes);
    EXPECT_EQ(p.tensor_scale, ref.s_dec);
    ASSERT_EQ(p.code_row_bytes, cols / 2);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t nib = (p.codes[i / 2] >> (4 * (i % 2))) & 0xf;
      ASSERT_EQ(nib, ref.elem_codes[i]) << "element " << i;
    }
  }
}

TEST(Nvfp4, ColumnBlocksEqualRowBlocksOfTheTranspose) {
  const size_t rows = 64, cols = 24;
  const auto x = test_tensor(rows * cols, 9);
  std::vector<float> xt(x.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  BlockScaling s = parse_block_scaling("nvfp4");
  const Ref ref = reference(xt, cols, rows, false);
  s.axis = 0;
  std::vector<float> q(x.size());
  block_fake_quantize(s, x, q, rows, cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) ASSERT_EQ(q[r * cols + c], ref.values[c * rows + r]);
  EXPECT_EQ(block_quantize(s, x, rows, cols).scales, ref.scale_codes);
}

TEST(Nvfp4, WorkedExampleAndEdgeBlocks) {
  // Tensor amax 2688 = 6 * 448: s_enc = 1. Block 1 amax 12: scale 2 (E4M3 exact), elements / 2.
  std::vector<float> x(32, 0.0f);
  x[0] = 2688;
  x[16] = 12;
  x[17] = 5;    // 2.5 -> 2 (tie to even) -> 4
  x[18] = -7;   // -3.5 -> -4 -> -8
  x[19] = 0.4f; // 0.2 -> 0
  BlockStats st;
  std::vector<float> q(32);
  block_fake_quantize(parse_block_scaling("nvfp4"), x, q, 1, 32, &st);
  EXPECT_EQ(q[0], 2688);
  EXPECT_EQ(q[16], 12);
  EXPECT_EQ(q[17], 4);
  EXPECT_EQ(q[18], -8);
  EXPECT_EQ(q[19], 0);
  EXPECT_EQ(st.flushed, 1u);
  // Block 0 counts as clipped: 2688 * fp32(1 / 448) is 6 plus one FP32 ulp, clamped back to 6.
  // The tensor's largest block can exceed 6 by the rounding of the reciprocal scale; the count
  // follows the strict definition (scaled amax > 6 before clamping) and is reported as such.
  EXPECT_GT(2688.0f * (1.0f / 448.0f), 6.0f);
  EXPECT_EQ(st.clipped_blocks, 1u);
  // An all-zero tensor: s_enc = 1, scales 0, values 0. A NaN block: NaN, scale code 0x7f.
  std::vector<float> z(16, 0.0f), qz(16);
  block_fake_quantize(parse_block_scaling("nvfp4"), z, qz, 1, 16);
  for (float v : qz) EXPECT_EQ(v, 0.0f);
  x[20] = NAN;
  block_fake_quantize(parse_block_scaling("nvfp4"), x, q, 1, 32);
  EXPECT_EQ(q[0], 2688);
  for (int i = 16; i < 32; ++i) EXPECT_TRUE(std::isnan(q[i]));
  EXPECT_EQ(block_quantize(parse_block_scaling("nvfp4"), x, 1, 32).scales[1], 0x7f);
}

TEST(Nvfp4, TensorAmaxOverrideSplitsATensorAcrossCalls) {
  const auto x = test_tensor(64 * 32, 4);
  const BlockScaling s = parse_block_scaling("nvfp4");
  std::vector<float> whole(x.size()), parts(x.size());
  block_fake_quantize(s, x, whole, 64, 32);
  const double amax = finite_amax(x);
  const size_t half = x.size() / 2;
  block_fake_quantize(s, std::span<const float>(x).first(half), std::span<float>(parts).first(half), 32, 32,
                      nullptr, 0, amax);
  block_fake_quantize(s, std::span<const float>(x).subspan(half), std::span<float>(parts).subspan(half), 32, 32,
                      nullptr, half, amax);
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), x.size() * 4), 0);
}


// Four Over Six (arXiv 2512.02010) written from the paper's procedure with the CUDA conversions:
// tensor scale 6 * 256 / amax, per 1x16 block the E4M3 scales of amax / 6 and amax / 4, the
// elements rounded under each, and the candidate with the strictly lower squared error wins.
struct Ref46 {
  std::vector<float> values;
  std::vector<uint8_t> scale_codes;
  int fours = 0;
};

Ref46 reference_4over6(const std::vector<float>& x, size_t cols) {
  float t = 0;
  for (float v : x) t = std::max(t, std::fabs(v));
  const float s_enc = t > 0 ? 6.0f * 256.0f / t : 1.0f;
  const float s_dec = 1.0f / s_enc;
  Ref46 r;
  r.values.resize(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += 16) {
    const size_t b1 = std::min(x.size(), b0 + 16);
    float amax = 0;
    for (size_t k = b0; k < b1; ++k) amax = std::max(amax, std::fabs(x[k]));
    double err[2] = {0, 0};
    std::vector<float> vals[2];
    __nv_fp8_storage_t codes[2];
    const float target[2] = {6.0f, 4.0f};
    for (int c = 0; c < 2; ++c) {
      codes[c] = __nv_cvt_float_to_fp8(amax / target[c] * s_enc, __NV_SATFINITE, __NV_E4M3);
      const float sv = fp8_value(codes[c]);
      const float s_enc_b = sv == 0 ? 0.0f : 1.0f / (sv * s_dec);
      for (size_t k = b0; k < b1; ++k) {
        const float q = fp4_value(__nv_cvt_float_to_fp4(x[k] * s_enc_b, __NV_E2M1, cudaRoundNearest));
        const float v = sv == 0 ? std::copysign(0.0f, q) : static_cast<float>(static_cast<double>(q) * sv * s_dec);
        vals[c].push_back(v);
        err[c] += (double(v) - x[k]) * (double(v) - x[k]);
      }
    }
    const int pick = err[1] < err[0] ? 1 : 0;
    r.fours += pick;
    r.scale_codes.push_back(codes[pick]);
    std::copy(vals[pick].begin(), vals[pick].end(), r.values.begin() + b0);
  }
  (void)cols;
  return r;
}

TEST(Nvfp4, FourOverSixMatchesThePaperProcedure) {
  for (uint64_t seed : {1, 2, 3}) {
    const size_t rows = 32, cols = 64;
    const auto x = test_tensor(rows * cols, seed);
    const Ref46 ref = reference_4over6(x, cols);
    const BlockScaling s = parse_block_scaling("nvfp4:4over6");
    std::vector<float> q(x.size());
    block_fake_quantize(s, x, q, rows, cols);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(q[i], ref.values[i]) << "element " << i << " x " << x[i];
    EXPECT_EQ(block_quantize(s, x, rows, cols).scales, ref.scale_codes);
    // Both candidates win somewhere on Gaussian data.
    EXPECT_GT(ref.fours, 0);
    EXPECT_LT(ref.fours, int(rows * cols / 16));
  }
}

TEST(Nvfp4, FourOverSixWorkedBlocksAndTies) {
  // Tensor amax 1536 = 6 * 256: s_enc = 1. Block 1 {6, 4.6}: to 6, 4.6 -> 4 (error 0.6); to 4 (scale
  // 1.5), 4.6 / 1.5 = 3.07 -> 3 -> 4.5 (error 0.1): 4 wins. Block 2 {6, 3}: both exact, 6 wins the tie.
  std::vector<float> x(48, 0.0f);
  x[0] = 1536;
  x[16] = 6, x[17] = 4.6f;
  x[32] = 6, x[33] = 3;
  std::vector<float> q(48);
  const BlockScaling s = parse_block_scaling("nvfp4:4over6");
  block_fake_quantize(s, x, q, 1, 48);
  EXPECT_EQ(q[16], 6.0f);
  EXPECT_EQ(q[17], 4.5f);
  EXPECT_EQ(q[32], 6.0f);
  EXPECT_EQ(q[33], 3.0f);
  const BlockPacked p = block_quantize(s, x, 1, 48);
  EXPECT_EQ(p.scales[1], __nv_cvt_float_to_fp8(1.5f, __NV_SATFINITE, __NV_E4M3));  // 6 / 4
  EXPECT_EQ(p.scales[2], __nv_cvt_float_to_fp8(1.0f, __NV_SATFINITE, __NV_E4M3));  // the tie keeps 6
}


// The block error Four Over Six saves (docs/recipes.md: 16% of the MSE on N(0,1), 9% on Student-t with 3
// degrees of freedom, 2^20 values; measured here on 2^16: 16.4% and 8.4%, bounds 11% and 6%).
TEST(Nvfp4, FourOverSixLowersTheErrorOnGaussianAndHeavyTailedData) {
  const size_t n = size_t{1} << 16;
  std::vector<float> g(n), t(n), z(4 * n);
  fill_normal(g, 7, 1);
  fill_normal(z, 7, 2);
  for (size_t i = 0; i < n; ++i) {  // t(3) = z / sqrt(chi2(3) / 3)
    const double c = (double(z[4 * i + 1]) * z[4 * i + 1] + double(z[4 * i + 2]) * z[4 * i + 2] +
                      double(z[4 * i + 3]) * z[4 * i + 3]) / 3;
    t[i] = static_cast<float>(z[4 * i] / std::sqrt(c));
  }
  auto mse = [&](const std::vector<float>& x, const char* scheme) {
    std::vector<float> q(x.size());
    block_fake_quantize(parse_block_scaling(scheme), x, q, x.size() / 64, 64);
    return error_stats(x, q).mse;
  };
  EXPECT_LT(mse(g, "nvfp4:4over6"), 0.89 * mse(g, "nvfp4"));
  EXPECT_LT(mse(t, "nvfp4:4over6"), 0.94 * mse(t, "nvfp4"));
}

}  // namespace
}  // namespace precsim

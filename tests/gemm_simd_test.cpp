// gemm()'s vector kernels give the scalar path's bits on every Highway target compiled into the
// binary: each output equals accum_dot() of its row and column (the scalar definition), for the
// FP32 sequential kernels and the block-FMA kernel, on shapes that cross the kernels' K slices,
// tile edges and thread splits, with operands that reach subnormal, overflowing and cancelling
// block results (the lanes the block kernel hands back to the scalar path).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

const Format kFp32 = format_by_name("fp32");

enum class Dist { kNormal, kWideExponents, kCancelling, kFloatLimits };

// Values of f: normal, or normal times 2^e with e spread over f's range (subnormals and zeros
// included), or rows whose second half negates the first (sums near zero), or binades spread over
// [-51, 62] with zeros, each row holding both ends: the limits of the float-lane block kernel for
// F = 24 and 25 (smallest product 2^-102 = 2^(F-127) at F = 25, largest below 2^126), where its
// products underflow and its alignment scales reach the ends of float's range.
std::vector<float> operand(const Format& f, int64_t rows, int64_t cols, Dist dist, uint64_t stream) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  fill_normal(v, 17, stream);
  if (dist == Dist::kWideExponents) {
    const int lo = std::max(f.emin() - f.man_bits, -140), hi = std::min(f.emax() - 2, 100);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = std::ldexp(v[i], lo + static_cast<int>(uniform01(17, stream + 100, i) * (hi - lo)));
  }
  if (dist == Dist::kFloatLimits) {
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t col = i % static_cast<size_t>(cols);
      int ignored = 0;
      const float sig = 2 * std::frexp(v[i], &ignored);                            // magnitude in [1, 2)
      const int e = -51 + static_cast<int>(uniform01(17, stream + 200, i) * 110);  // sums stay finite
      v[i] = col == 0       ? std::copysign(0x1.4p-51f, sig)
             : col == 1     ? std::copysign(0x1.8p62f, sig)
             : col % 7 == 3 ? 0.0f
                            : std::ldexp(sig, e);
    }
  }
  quantize(f, v, v);
  if (dist == Dist::kCancelling)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = cols / 2; c < cols; ++c) v[r * cols + c] = -v[r * cols + c - cols / 2];
  return v;
}

struct Case {
  const char* model;
  const char* in;
  Dist dist;
};

void expect_gemm_equals_dot(const Case& cs, int64_t m, int64_t n, int64_t k, int threads) {
  const AccumModel model = parse_accum_model(cs.model);
  const Format in = format_by_name(cs.in);
  // A is M x K (rows cancel along K); B is stored N x K (trans_b) so its columns cancel too.
  const auto a = operand(in, m, k, cs.dist, 1), bt = operand(in, n, k, cs.dist, 2);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.trans_b = true;
  g.a_format = g.b_format = in;
  g.threads = threads;
  std::vector<float> c(static_cast<size_t>(m * n));
  gemm(model, g, a.data(), bt.data(), c.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const std::span<const float> row(a.data() + i * k, k), col(bt.data() + j * k, k);
      const float want = static_cast<float>(accum_dot(model, row, col, 0, in, in, nullptr, &kFp32));
      const float got = c[i * n + j];
      ASSERT_TRUE(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want) ||
                  (std::isnan(got) && std::isnan(want)))
          << cs.model << " on " << cs.in << ": C[" << i << "][" << j << "] = " << got << " (" << std::hexfloat << got
          << "), scalar path " << want;
    }
  }
}

const Case kCases[] = {
    {"fp32-seq", "bf16", Dist::kNormal},
    {"fp32-seq", "fp32", Dist::kWideExponents},
    {"fp32-fma", "fp32", Dist::kNormal},
    {"fp32-fma", "bf16", Dist::kWideExponents},
    {"a100", "bf16", Dist::kNormal},
    {"a100", "fp16", Dist::kWideExponents},
    {"v100", "fp16", Dist::kCancelling},
    {"h100", "bf16", Dist::kWideExponents},
    {"h100", "bf16", Dist::kCancelling},
    {"h100", "bf16", Dist::kFloatLimits},
    {"a100", "bf16", Dist::kFloatLimits},
    {"b200-fp8", "e4m3", Dist::kNormal},  // half-block int32 sums added in double
    {"h100-tf32", "tf32", Dist::kNormal},
    {"h100-fp8-fast", "e4m3", Dist::kNormal},
    {"h100-fp8-promote", "e4m3", Dist::kWideExponents},
    {"h100-fp8-promote:promote=40", "e5m2", Dist::kNormal},  // groups that end inside a block
    {"b200-fp8", "e5m2", Dist::kWideExponents},
    {"block:n=5:F=30:final=nearest-even", "fp16", Dist::kWideExponents},
    {"block:acc=fp16:n=8:F=24:final=nearest-even:floor=-21", "fp16", Dist::kWideExponents},  // fp16 overflows
    {"block:n=16:F=25:insub=0:outsub=0", "fp16", Dist::kWideExponents},
};

TEST(GemmSimd, EveryTargetGivesTheScalarPathsBits) {
  const auto targets = quantize_simd_targets();
  ASSERT_FALSE(targets.empty());
  for (const auto& target : targets) {
    force_quantize_simd_target(target);
    EXPECT_EQ(gemm_simd_target(), target);
    for (const Case& cs : kCases) {
      SCOPED_TRACE(target + " " + cs.model + " " + cs.in + " dist " + std::to_string(int(cs.dist)));
      expect_gemm_equals_dot(cs, 11, 37, 600, 2);  // K crosses slice boundaries (FP32 512, block FMA 256)
      expect_gemm_equals_dot(cs, 3, 5, 7, 1);      // smaller than one tile
    }
  }
  force_quantize_simd_target("");
}

TEST(GemmSimd, NonFiniteOperandsTakeTheScalarPath) {
  const Format bf16 = format_by_name("bf16");
  const int64_t m = 3, n = 20, k = 40;
  auto a = operand(bf16, m, k, Dist::kNormal, 3), bt = operand(bf16, n, k, Dist::kNormal, 4);
  a[5] = INFINITY;      // row 0: +inf products
  bt[3 * k + 2] = NAN;  // column 3: NaN
  for (const char* name : {"h100", "fp32-seq"}) {
    const AccumModel model = parse_accum_model(name);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.trans_b = true, g.a_format = g.b_format = bf16;
    std::vector<float> c(m * n);
    const GemmStats st = gemm(model, g, a.data(), bt.data(), c.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double want = accum_dot(model, {a.data() + i * k, size_t(k)}, {bt.data() + j * k, size_t(k)}, 0, bf16,
                                      bf16, nullptr, &kFp32);
        EXPECT_TRUE(c[i * n + j] == want || (std::isnan(c[i * n + j]) && std::isnan(want)))
            << name << " " << i << "," << j;
      }
    EXPECT_EQ(st.nan_outputs, static_cast<uint64_t>(m)) << name;      // column 3
    EXPECT_EQ(st.inf_outputs, static_cast<uint64_t>(n - 1)) << name;  // the rest of row 0
    // The output statistics of the store without alpha, beta or rounding: every output counted, the
    // NaN ones as NaN results, nothing else; a double output (rounded into FP32 by the general
    // epilogue) counts the same.
    QuantStats want_out;
    want_out.count = static_cast<uint64_t>(m * n);
    want_out.nan = static_cast<uint64_t>(m);
    EXPECT_EQ(st.output, want_out) << name;
    std::vector<double> c64(m * n);
    const GemmStats st64 = gemm(model, g, a.data(), bt.data(), c64.data());
    EXPECT_EQ(st64.output, want_out) << name;
    EXPECT_EQ(st64.nan_outputs, static_cast<uint64_t>(m)) << name;
    EXPECT_EQ(st64.inf_outputs, static_cast<uint64_t>(n - 1)) << name;
    for (size_t i = 0; i < c.size(); ++i)
      EXPECT_TRUE(c64[i] == c[i] || (std::isnan(c64[i]) && std::isnan(c[i]))) << name << " double output " << i;
  }
}

}  // namespace
}  // namespace precsim

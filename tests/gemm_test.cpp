// gemm() against its own definition: every output equals the model's dot product of the row of
// op(A) and the column of op(B), for every layout, thread count and epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

const Format kFp32 = format_by_name("fp32");

std::vector<float> normal_in(const Format& f, size_t n, uint64_t seed, uint64_t stream) {
  std::vector<float> v(n);
  fill_normal(v, seed, stream);
  quantize(f, v, v);
  return v;
}

struct Case {
  std::string model;
  std::string in;
};

class GemmMatchesDot : public ::testing::TestWithParam<Case> {};

// op(A) M x K, op(B) K x N stored transposed or not, with padded leading dimensions.
TEST_P(GemmMatchesDot, EveryLayout) {
  const AccumModel model = parse_accum_model(GetParam().model);
  const Format in = format_by_name(GetParam().in);
  const int64_t m = 7, n = 33, k = 70, pad = 3;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(::testing::Message() << "trans_a " << ta << " trans_b " << tb);
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
      g.a_format = g.b_format = in;
      g.lda = (ta ? m : k) + pad;
      g.ldb = (tb ? k : n) + pad;
      g.ldc = n + pad;
      const auto a = normal_in(in, static_cast<size_t>((ta ? k : m) * g.lda), 11, 1);
      const auto b = normal_in(in, static_cast<size_t>((tb ? n : k) * g.ldb), 11, 2);
      std::vector<float> c(static_cast<size_t>(m * g.ldc), -7.0f);
      const GemmStats st = gemm(model, g, a.data(), b.data(), c.data());
      EXPECT_EQ(st.macs, static_cast<uint64_t>(m * n * k));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          std::vector<float> row(k), col(k);
          for (int64_t p = 0; p < k; ++p) {
            row[p] = ta ? a[p * g.lda + i] : a[i * g.lda + p];
            col[p] = tb ? b[j * g.ldb + p] : b[p * g.ldb + j];
          }
          const float want = static_cast<float>(accum_dot(model, row, col, 0, in, in, nullptr, &kFp32));
          ASSERT_EQ(c[i * g.ldc + j], want) << "C[" << i << "][" << j << "]";
        }
        for (int64_t j = n; j < g.ldc; ++j) EXPECT_EQ(c[i * g.ldc + j], -7.0f);  // padding untouched
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GemmMatchesDot,
    ::testing::Values(Case{"fp32-seq", "bf16"}, Case{"fp32-fma", "fp32"}, Case{"fp32-seq", "fp32"},
                      Case{"pairwise", "bf16"}, Case{"kahan", "fp16"}, Case{"exact", "fp32"},
                      Case{"seq:acc=bf16", "bf16"}, Case{"seq:acc=fp64", "fp32"}, Case{"a100", "fp16"},
                      Case{"v100", "fp16"}, Case{"h100", "bf16"}, Case{"h100-fp8-fast", "e4m3"},
                      Case{"h100-fp8-promote:promote=32", "e5m2"}, Case{"fp32-seq:splitk=3", "bf16"},
                      Case{"h100:splitk=2:splitk_scheme=output", "bf16"}),
    [](const auto& info) {
      std::string s = info.param.model + "_" + info.param.in;
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

TEST(Gemm, SameBitsOnAnyThreadCount) {
  const Format bf16 = format_by_name("bf16");
  const int64_t m = 9, n = 300, k = 257;
  const auto a = normal_in(bf16, m * k, 3, 1), b = normal_in(bf16, k * n, 3, 2);
  for (const char* name : {"fp32-seq", "fp32-fma", "a100", "kahan"}) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a_format = g.b_format = bf16;
    std::vector<float> c1(m * n), c2(m * n);
    g.threads = 1;
    gemm(parse_accum_model(name), g, a.data(), b.data(), c1.data());
    g.threads = 2;
    gemm(parse_accum_model(name), g, a.data(), b.data(), c2.data());
    EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float))) << name;
  }
}

TEST(Gemm, EpilogueAlphaBetaAndOutputFormat) {
  const Format bf16 = format_by_name("bf16");
  const AccumModel model = parse_accum_model("fp32-seq");
  const int64_t m = 5, n = 9, k = 40;
  const auto a = normal_in(bf16, m * k, 4, 1), b = normal_in(bf16, k * n, 4, 2);
  const auto c0 = normal_in(kFp32, m * n, 4, 3);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a_format = g.b_format = bf16;
  g.alpha = 0.75, g.beta = -1.5;
  g.out_format = bf16;
  std::vector<float> c = c0;
  const GemmStats st = gemm(model, g, a.data(), b.data(), c.data());
  uint64_t inexact = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < k; ++p) acc = acc + a[i * k + p] * b[p * n + j];
      const float t = 0.75f * acc + (-1.5f) * c0[i * n + j];  // each op rounded to FP32
      uint32_t s = 0;
      EXPECT_EQ(c[i * n + j], static_cast<float>(round_to(bf16, t, {}, &s)));
      inexact += (s & kInexact) != 0;
    }
  }
  EXPECT_EQ(st.output.inexact, inexact);
  EXPECT_GT(inexact, 0u);
}

TEST(Gemm, OperandsOutsideTheirFormatAreCheckedOrRounded) {
  const Format bf16 = format_by_name("bf16");
  const int64_t m = 2, n = 2, k = 3;
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1};
  a[4] = 1.0f + 0x1p-10f;  // not a bf16 value
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a_format = g.b_format = bf16;
  std::vector<float> c(4);
  try {
    gemm(parse_accum_model("fp32-seq"), g, a.data(), b.data(), c.data());
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("A[1][1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
  g.input_policy = InputPolicy::kRound;
  const GemmStats st = gemm(parse_accum_model("fp32-seq"), g, a.data(), b.data(), c.data());
  EXPECT_EQ(st.inputs.inexact, 1u);
  EXPECT_EQ(c[3], 7.0f);  // C[1][1] = 4*0 + a[1][1]*1 + 6*1 with a[1][1] rounded to 1
}

TEST(Gemm, TensorFloat32OperandsFollowTheModelsInputRounding) {
  const Format tf32 = format_by_name("tf32");
  const float x = 1.0f + 0x1.8p-11f;  // halfway between two TF32 values above the tie: 1 + 2^-10 or 1
  const std::vector<float> a = {x}, b = {1.0f};
  GemmArgs g;
  g.m = g.n = g.k = 1;
  g.a_format = g.b_format = tf32;
  g.input_policy = InputPolicy::kRound;
  float c = 0;
  gemm(parse_accum_model("h100-tf32:tf32=toward-zero"), g, a.data(), b.data(), &c);
  EXPECT_EQ(c, 1.0f);
  gemm(parse_accum_model("h100-tf32"), g, a.data(), b.data(), &c);
  EXPECT_EQ(c, 1.0f + 0x1p-10f);
  // The same encoding spelt as a spec is TF32 too: the model's input rounding applies to it.
  g.a_format = g.b_format = format_by_name("e8m10");
  ASSERT_NE(g.a_format.name, tf32.name);
  gemm(parse_accum_model("h100-tf32:tf32=toward-zero"), g, a.data(), b.data(), &c);
  EXPECT_EQ(c, 1.0f);
}

TEST(Gemm, Fp64ReferencePathIsThePlainDoubleLoop) {
  const int64_t m = 6, n = 7, k = 50;
  std::vector<double> a(m * k), b(k * n), c(m * n);
  fill_normal(a, 5, 1);
  fill_normal(b, 5, 2);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.trans_b = true, g.ldb = k;
  // trans_b: b holds B^T (N x K); reuse the buffer as such.
  std::vector<double> bt(n * k);
  fill_normal(bt, 5, 2);
  gemm_f64(g, a.data(), bt.data(), c.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s = s + a[i * k + p] * bt[j * k + p];
      EXPECT_EQ(c[i * n + j], s);
    }
  }
}

TEST(Gemm, BadShapesAreRejected) {
  GemmArgs g;
  g.m = 2, g.n = 2, g.k = 3, g.lda = 2;  // lda shorter than a row of A
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(gemm(parse_accum_model("fp32-seq"), g, a.data(), b.data(), c.data()), std::invalid_argument);
  g.lda = 0;
  g.m = -1;
  EXPECT_THROW(gemm(parse_accum_model("fp32-seq"), g, a.data(), b.data(), c.data()), std::invalid_argument);
  EXPECT_GT(gemm_bytes_estimate(1 << 30, 1 << 30, 1 << 30), uint64_t{1} << 62);
}

}  // namespace
}  // namespace precsim

// gemm() with block-scaled operands (MX, NVFP4, FP8 1x128 tiles and 128x128 blocks) made by
// block_quantize: each group of K is the model's sum, scaled and added in FP32. Checked against
// sums computed here from the exact long accumulator and from accum_dot (the scalar definition),
// against plain float loops over the dequantised operands (power-of-two scales commute with
// rounding), and against the exact product of the dequantised operands.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

const Format kFp32 = format_by_name("fp32");

// One operand quantized along K (rows x k, blocks along each row): element values, raw decode
// scales in block order, and the second-level tensor scale.
struct Scaled {
  std::vector<float> elems, scales, dequantised;
  int64_t ld = 0, block_k = 0, block_mn = 1;
  float tensor = 1;
  BlockScales view() const { return {scales.data(), block_k, block_mn, ld, tensor}; }
};

Scaled quantize_along_k(const std::string& scheme, int64_t rows, int64_t k, uint64_t stream) {
  const BlockScaling s = parse_block_scaling(scheme);
  std::vector<float> x(static_cast<size_t>(rows * k));
  fill_normal(x, 23, stream);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], static_cast<int>(i / k) % 7 - 3);  // rows of mixed range
  const BlockPacked p = block_quantize(s, x, rows, k);
  Scaled out;
  out.elems.resize(x.size());
  std::vector<uint8_t> codes(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = p.codes.data() + r * p.code_row_bytes;
    if (s.element.bits() <= 4) unpack_nibbles({row, p.code_row_bytes}, codes);
    else codes.assign(row, row + k);
    for (int64_t c = 0; c < k; ++c) out.elems[r * k + c] = static_cast<float>(decode(s.element, codes[c]));
  }
  const bool e4m3_scales = s.scale_format == ScaleFormat::kE4M3;
  for (size_t i = 0; i < p.scale_rows * p.scale_cols; ++i)
    out.scales.push_back(e4m3_scales ? static_cast<float>(decode(format_by_name("e4m3"), p.scales[i]))
                                     : static_cast<float>(block_scale_value(s, p, i)));
  out.ld = static_cast<int64_t>(p.scale_cols);
  out.block_k = s.block_along;
  out.block_mn = s.block_across == 0 ? rows : s.block_across;
  out.tensor = p.tensor_scale;
  out.dequantised.resize(x.size());
  block_dequantize(s, p, out.dequantised);
  return out;
}

struct Problem {
  int64_t m, n, k;
  Scaled a, bt;  // A is M x K; B is stored transposed, N x K
};

Problem make(const std::string& a_scheme, const std::string& b_scheme, int64_t m, int64_t n, int64_t k) {
  return {m, n, k, quantize_along_k(a_scheme, m, k, 1), quantize_along_k(b_scheme, n, k, 2)};
}

std::vector<float> run(const Problem& pr, const std::string& model, const Format& elem_a, const Format& elem_b) {
  GemmArgs g;
  g.m = pr.m, g.n = pr.n, g.k = pr.k, g.trans_b = true;
  g.a_format = elem_a, g.b_format = elem_b;
  g.a_scales = pr.a.view();
  g.b_scales = pr.bt.view();
  g.threads = 2;
  std::vector<float> c(static_cast<size_t>(pr.m * pr.n));
  gemm(parse_accum_model(model), g, pr.a.elems.data(), pr.bt.elems.data(), c.data());
  return c;
}

float scale_of(const Scaled& s, int64_t row, int64_t group) { return s.scales[(row / s.block_mn) * s.ld + group]; }

// acc = fl32(acc + fl32(fl32(sa * sb) * group_sum(q))) over the groups, then the tensor scales.
template <class GroupSum>
float scaled_sum(const Problem& pr, int64_t i, int64_t j, GroupSum group_sum) {
  const int64_t gk = pr.a.block_k;
  float acc = 0;
  for (int64_t q = 0; q * gk < pr.k; ++q) {
    const int64_t len = std::min(gk, pr.k - q * gk);
    const std::span<const float> a(pr.a.elems.data() + i * pr.k + q * gk, len), b(pr.bt.elems.data() + j * pr.k + q * gk, len);
    const float s = scale_of(pr.a, i, q) * scale_of(pr.bt, j, q);
    acc = acc + s * group_sum(a, b);
  }
  const float t = pr.a.tensor * pr.bt.tensor;
  return t == 1.0f ? acc : t * acc;
}

// The exact product of the dequantised operands, and the normwise scale sum |a||b| of one output.
void exact_reference(const Problem& pr, int64_t i, int64_t j, double& exact, double& abs_sum) {
  const std::span<const float> a(pr.a.dequantised.data() + i * pr.k, pr.k), b(pr.bt.dequantised.data() + j * pr.k, pr.k);
  exact = exact_dot_double(a, b);
  abs_sum = 0;
  for (int64_t p = 0; p < pr.k; ++p) abs_sum += std::fabs(double(a[p]) * b[p]);
}

struct SchemeCase {
  const char* a;
  const char* b;
  const char* elem;
};

class BlockScaledGemm : public ::testing::TestWithParam<SchemeCase> {};

// The exact model rounds each group's exact sum once into FP32; the rest is FP32 arithmetic.
TEST_P(BlockScaledGemm, ExactModelIsTheExactGroupSumsScaledInFp32) {
  const Problem pr = make(GetParam().a, GetParam().b, 9, 21, 300);
  const Format elem = format_by_name(GetParam().elem);
  const std::vector<float> c = run(pr, "exact", elem, elem);
  double worst = 0;
  for (int64_t i = 0; i < pr.m; ++i) {
    for (int64_t j = 0; j < pr.n; ++j) {
      const float want = scaled_sum(pr, i, j, [&](auto a, auto b) {
        return static_cast<float>(decode(kFp32, exact_dot(a, b, 0, kFp32).code));
      });
      ASSERT_EQ(c[i * pr.n + j], want) << "C[" << i << "][" << j << "]";
      double exact, abs_sum;
      exact_reference(pr, i, j, exact, abs_sum);
      worst = std::max(worst, std::fabs(c[i * pr.n + j] - exact) / abs_sum);
    }
  }
  // Against the exact product of the dequantised operands: a few FP32 roundings per group (none
  // for MXFP4, whose group sums and power-of-two scales are exact in FP32).
  EXPECT_LT(worst, 32 * 0x1p-24) << GetParam().a;
}

// Inside a group the model's own order, blocks and promotion: accum_dot of the group.
TEST_P(BlockScaledGemm, BlockFmaModelSumsEachGroupAsAccumDot) {
  const Problem pr = make(GetParam().a, GetParam().b, 5, 19, 260);
  const Format elem = format_by_name(GetParam().elem);
  for (const char* name : {"h100-fp8-fast", "b200-fp8", "fp32-seq"}) {
    const AccumModel model = parse_accum_model(name);
    const std::vector<float> c = run(pr, name, elem, elem);
    for (int64_t i = 0; i < pr.m; ++i)
      for (int64_t j = 0; j < pr.n; ++j) {
        const float want = scaled_sum(pr, i, j, [&](auto a, auto b) {
          return static_cast<float>(accum_dot(model, a, b, 0, elem, elem, nullptr, &kFp32));
        });
        ASSERT_EQ(c[i * pr.n + j], want) << name << " C[" << i << "][" << j << "]";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, BlockScaledGemm,
                         ::testing::Values(SchemeCase{"mxfp8_e4m3", "mxfp8_e4m3", "e4m3"},
                                           SchemeCase{"mxfp4", "mxfp4", "e2m1"},
                                           SchemeCase{"nvfp4", "nvfp4", "e2m1"},
                                           SchemeCase{"fp8_e4m3:tile128", "fp8_e4m3:block128", "e4m3"}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.a) + "_" + info.param.b;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// With power-of-two (E8M0) scales, scaling commutes with every FP32 rounding, so the scaled GEMM
// equals a plain float loop over the dequantised operands that restarts at each group of 32.
TEST(BlockScaledGemmMx, PowerOfTwoScalesEqualTheDequantisedOperands) {
  const Problem pr = make("mxfp8_e5m2", "mxfp8_e5m2", 7, 13, 200);
  const std::vector<float> c = run(pr, "fp32-seq", format_by_name("e5m2"), format_by_name("e5m2"));
  for (int64_t i = 0; i < pr.m; ++i)
    for (int64_t j = 0; j < pr.n; ++j) {
      float acc = 0;
      for (int64_t q = 0; q * 32 < pr.k; ++q) {
        float group = 0;
        for (int64_t p = q * 32; p < std::min(pr.k, q * 32 + 32); ++p)
          group = group + pr.a.dequantised[i * pr.k + p] * pr.bt.dequantised[j * pr.k + p];
        acc = acc + group;
      }
      ASSERT_EQ(c[i * pr.n + j], acc) << "C[" << i << "][" << j << "]";
    }
}

TEST(BlockScaledGemmMx, MismatchedBlocksAndShortScaleRowsAreRejected) {
  const Problem pr = make("mxfp8_e4m3", "nvfp4", 2, 3, 64);
  const Format e4m3 = format_by_name("e4m3");
  GemmArgs g;
  g.m = 2, g.n = 3, g.k = 64, g.trans_b = true, g.a_format = e4m3, g.b_format = format_by_name("e2m1");
  g.a_scales = pr.a.view();
  g.b_scales = pr.bt.view();
  std::vector<float> c(6);
  try {
    gemm(parse_accum_model("fp32-seq"), g, pr.a.elems.data(), pr.bt.elems.data(), c.data());
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("over 32 k but B's over 16"), std::string::npos) << e.what();
  }
  g.b_scales = {};
  g.a_scales.ld = 1;  // two blocks of 32 along K = 64
  EXPECT_THROW(gemm(parse_accum_model("fp32-seq"), g, pr.a.elems.data(), pr.bt.elems.data(), c.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace precsim

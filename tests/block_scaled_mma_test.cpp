// The FP16-output and block-scaled Tensor Core presets on hand-worked cases (the bit-for-bit
// comparison with MMA-Sim is mmasim_oracle_test): what makes them differ from the FP32-output
// instruction and from an FP32 multiply after each block sum, and what they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/train/recipe_gemm.h"

namespace precsim {
namespace {

double dot(const char* preset, std::vector<float> a, std::vector<float> b, double c, const char* fmt) {
  const Format f = format_by_name(fmt);
  return accum_dot(parse_accum_model(preset), a, b, c, f, f);
}

TEST(Fp16Output, EachBlockIsRoundedToNearestFp16) {
  // 1 + 2^-11 is half an FP16 ulp above 1: nearest-even gives 1; the FP32 output keeps it.
  EXPECT_EQ(dot("v100-f16acc", {1, 0x1p-11f}, {1, 1}, 0, "fp16"), 1.0);
  EXPECT_EQ(dot("v100", {1, 0x1p-11f}, {1, 1}, 0, "fp16"), 1.0 + 0x1p-11);
  // 1 + 3 * 2^-12 is above the midpoint: up to 1 + 2^-10 (truncation would give 1).
  EXPECT_EQ(dot("h100-f16acc", {1, 0x1.8p-11f}, {1, 1}, 0, "fp16"), 1.0 + 0x1p-10);
  // Overflow of the FP16 result is Inf, and the next block keeps it.
  std::vector<float> big(32, 65504.0f);
  EXPECT_EQ(dot("b200-f16acc", big, std::vector<float>(32, 1.0f), 0, "fp16"), INFINITY);
}

TEST(Fp16Output, EveryVariantIsItsPresetWithFp16Output) {
  for (const auto& m : accum_presets()) {
    if (!m.name.ends_with("-f16acc")) continue;
    const AccumModel* base = nullptr;
    for (const auto& p : accum_presets())
      if (p.name + "-f16acc" == m.name) base = &p;
    ASSERT_NE(base, nullptr) << m.name;
    EXPECT_EQ(fp16_output_variant(base->name), &m);
    EXPECT_EQ(m.acc.name, "fp16");
    EXPECT_EQ(m.block.out_frac_bits, 10);
    EXPECT_EQ(m.block.final_rounding, Rounding::kNearestEven);
    EXPECT_EQ(m.block.block_size, base->block.block_size);
    EXPECT_EQ(m.block.frac_bits, base->block.frac_bits);
  }
  for (const char* none : {"a100-tf32", "h100-tf32", "h100-fp8-promote", "b200-mxf8f6f4", "fp32-seq"})
    EXPECT_EQ(fp16_output_variant(none), nullptr) << none;
}

GemmArgs scaled_args(int64_t k, const char* fmt, const std::vector<float>& sa, int64_t block_k) {
  GemmArgs g;
  g.m = 1, g.n = 1, g.k = k;
  g.a_format = g.b_format = format_by_name(fmt);
  g.a_scales = BlockScales{sa.data(), block_k};
  return g;
}

TEST(BlockScaledMma, Mxf8f6f4TruncatesEachInstructionInsteadOfAnFp32Add) {
  // Block 0: 1 * 1 * 2^20; block 1: 1.5 * 1 * 2^-4 = 0.09375, 3/4 of an FP32 ulp of 2^20. Inside
  // the instruction the sum 2^20 + 0.09375 is truncated to 2^20; an FP32 add after the block sum
  // rounds it to nearest, 2^20 + 0.125.
  std::vector<float> a(64, 0.0f), b(64, 1.0f), sa = {0x1p20f, 0x1p-4f};
  a[0] = 1.0f;
  a[32] = 1.5f;
  const GemmArgs g = scaled_args(64, "e4m3", sa, 32);
  float inside = 0, after = 0;
  gemm(parse_accum_model("b200-mxf8f6f4"), g, a.data(), b.data(), &inside);
  gemm(parse_accum_model("b200-fp8"), g, a.data(), b.data(), &after);
  EXPECT_EQ(inside, 0x1p20f);
  EXPECT_EQ(after, 0x1p20f + 0.125f);
}

TEST(BlockScaledMma, Mxf4nvf4AlignsAGroupThatCancelsByItsScale) {
  // Instruction 1: group 0 gives 1 (scales 1), group 1 0.25 * 2^-9 * 2^-9 = 2^-20: C = 1 + 2^-20.
  // Instruction 2: group 0 is 6*6 - 6*6 = 0 under scales 448 * 448 (exponent 16): with 35
  // fraction bits below 2^16, C's 2^-20 is cut, and D = 1.
  std::vector<float> a(128, 0.0f), b(128, 0.0f), sa(8, 1.0f), sb(8, 1.0f);
  a[0] = b[0] = 1.0f;
  a[16] = b[16] = 0.5f;
  sa[1] = sb[1] = 0x1p-9f;
  a[64] = 6.0f, a[65] = -6.0f, b[64] = b[65] = 6.0f;
  sa[4] = sb[4] = 448.0f;
  GemmArgs g = scaled_args(128, "e2m1", sa, 16);
  g.b_scales = BlockScales{sb.data(), 16};
  float d = 0;
  gemm(parse_accum_model("b200-mxf4nvf4"), g, a.data(), b.data(), &d);
  EXPECT_EQ(d, 1.0f);
  sa[4] = sb[4] = 1.0f;  // the same group under unit scales leaves C whole
  gemm(parse_accum_model("b200-mxf4nvf4"), g, a.data(), b.data(), &d);
  EXPECT_EQ(d, 1.0f + 0x1p-20f);
}

std::string error_of(const char* preset, const GemmArgs& g, const std::vector<float>& a) {
  float d = 0;
  const std::vector<float> b(a.size(), 1.0f);
  try {
    gemm(parse_accum_model(preset), g, a.data(), b.data(), &d);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(BlockScaledMma, RefusesWhatTheInstructionCannotTake) {
  const std::vector<float> a(64, 1.0f), pow2 = {1.0f, 2.0f}, odd = {1.0f, 3.0f};
  EXPECT_NE(error_of("b200-mxf8f6f4", scaled_args(64, "e4m3", odd, 32), a).find("[0][1] = 3"), std::string::npos);
  EXPECT_NE(error_of("b200-mxf8f6f4", scaled_args(64, "e4m3", {1, 1, 1, 1}, 16), a).find("scale blocks of 32 k, not 16"),
            std::string::npos);
  EXPECT_NE(error_of("b200-mxf8f6f4", scaled_args(64, "bf16", pow2, 32), a).find("operand format 'bf16'"),
            std::string::npos);
  EXPECT_NE(error_of("b200-mxf4nvf4", scaled_args(64, "e4m3", {1, 1, 1, 1}, 16), a).find("allowed: e2m1"),
            std::string::npos);
  EXPECT_NE(error_of("b200-mxf4nvf4", scaled_args(64, "e2m1", pow2, 32), a).find("scale blocks of 16 k"),
            std::string::npos);
  EXPECT_EQ(error_of("b200-mxf4", scaled_args(64, "e2m1", pow2, 32), a), "");
  EXPECT_THROW(parse_accum_model("b200-mxf4:promote=128"), std::invalid_argument);
  EXPECT_THROW(parse_accum_model("h100:group=16"), std::invalid_argument);
}

TEST(BlockScaledMma, RecipeGemmsTakeThemOnlyWithBlockScaledOperands) {
  // A recipe's GEMM hands them codes and scales (block_scaled_recipe_test); FP32 operands have none.
  GemmSpec spec;
  spec.accum = accum_spec("b200-mxf4nvf4");
  try {
    RecipeGemm g(GemmPass::kForward, spec, 1, 0);
    FAIL() << "a recipe GEMM took " << spec.accum.spec << " with FP32 operands";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gemm.forward.a: accumulation model 'b200-mxf4nvf4' applies block scales inside "
                                         "the instruction and takes block-scaled operands"),
              std::string::npos) << e.what();
  }
  spec.accum = accum_spec("b200-fp8-f16acc");
  EXPECT_NO_THROW(RecipeGemm(GemmPass::kForward, spec, 1, 0));
}

}  // namespace
}  // namespace precsim

// Agreement statistics and operand sets for device-vs-emulation GEMMs, checked on hand-made
// results and against exact arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/hw/gpu_compare.h"

namespace precsim {
namespace {

const Format kFp32 = format_by_name("fp32");

TEST(GpuCompare, CountsExactMatchesAndUlps) {
  const double one = 1.0, next = std::nextafter(1.0f, 2.0f), next3 = 1.0 + 3 * std::ldexp(1.0, -23);
  const std::vector<double> dev = {one, next, next3, -0.0, 0.0};
  const std::vector<double> emu = {one, one, one, 0.0, 0.0};
  const MatchStats s = compare_results(kFp32, dev, emu);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.exact, 2u);  // -0 and +0 are different results
  EXPECT_DOUBLE_EQ(s.exact_fraction, 0.4);
  EXPECT_EQ(s.max_ulp, 3);
  EXPECT_EQ(s.first_mismatch, 1);
  EXPECT_EQ(s.first_device, next);
  EXPECT_EQ(s.first_emulated, one);
}

TEST(GpuCompare, UlpsCrossZeroAndBinades) {
  const double tiny = std::ldexp(1.0, -149);  // smallest fp32 subnormal
  const MatchStats a = compare_results(kFp32, std::vector<double>{tiny}, std::vector<double>{-tiny});
  EXPECT_EQ(a.max_ulp, 2);
  const double below2 = 2.0 - std::ldexp(1.0, -23), above2 = 2.0 + std::ldexp(1.0, -22);
  const MatchStats b = compare_results(kFp32, std::vector<double>{below2}, std::vector<double>{above2});
  EXPECT_EQ(b.max_ulp, 2);
}

TEST(GpuCompare, NanAndInfinityMismatchesAreCountedApart) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  const MatchStats s = compare_results(kFp32, std::vector<double>{nan, nan, inf, 1.0},
                                       std::vector<double>{nan, 1.0, 1.0, 1.0});
  EXPECT_EQ(s.exact, 2u);
  EXPECT_EQ(s.nan_mismatches, 2u);
  EXPECT_EQ(s.max_ulp, 0);
}

TEST(GpuCompare, RejectsValuesOutsideTheFormatAndLengthMismatch) {
  EXPECT_THROW(compare_results(kFp32, std::vector<double>{0.1}, std::vector<double>{0.1}), std::invalid_argument);
  EXPECT_THROW(compare_results(kFp32, std::vector<double>{1.0}, std::vector<double>{}), std::invalid_argument);
}

TEST(GpuCompare, OperandSetsHoldValuesOfTheirFormats) {
  for (const std::string fmt_name : {"fp16", "bf16", "e4m3", "e5m2", "tf32"}) {
    const Format f = format_by_name(fmt_name);
    for (const auto& set_name : operand_set_names()) {
      std::vector<float> a, b;
      make_operands(parse_operand_set(set_name), f, f, 8, 8, 64, 7, a, b);
      ASSERT_EQ(a.size(), 8u * 64);
      ASSERT_EQ(b.size(), 64u * 8);
      size_t nonzero = 0;
      for (float x : a) {
        ASSERT_TRUE(std::isfinite(x)) << fmt_name << " " << set_name;
        ASSERT_EQ(round_to(f, x), x) << fmt_name << " " << set_name << " " << x;
        nonzero += x != 0;
      }
      for (float x : b) ASSERT_EQ(round_to(f, x), x) << fmt_name << " " << set_name;
      EXPECT_GT(nonzero, a.size() / 2) << fmt_name << " " << set_name;
    }
  }
}

TEST(GpuCompare, OperandsAreReproducibleFromTheSeed) {
  const Format f = format_by_name("bf16");
  std::vector<float> a1, b1, a2, b2, a3, b3;
  make_operands(OperandSet::kRandom, f, f, 4, 4, 32, 11, a1, b1);
  make_operands(OperandSet::kRandom, f, f, 4, 4, 32, 11, a2, b2);
  make_operands(OperandSet::kRandom, f, f, 4, 4, 32, 12, a3, b3);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(b1, b2);
  EXPECT_NE(a1, a3);
}

TEST(GpuCompare, CancellationOperandsCancelToALastBitDifference) {
  // Each pair of products a*b + (-a)*(b + ulp) sums exactly to -a*ulp(b): the exact dot product
  // is tiny next to the size of its terms.
  const Format f = format_by_name("fp16");
  std::vector<float> a, b;
  make_operands(OperandSet::kCancellation, f, f, 2, 2, 64, 3, a, b);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double exact = 0, mag = 0;  // products of fp16 values are exact in double, and so is this sum
      for (int l = 0; l < 64; ++l) {
        exact += static_cast<double>(a[i * 64 + l]) * b[l * 2 + j];
        mag += std::fabs(static_cast<double>(a[i * 64 + l]) * b[l * 2 + j]);
      }
      EXPECT_LT(std::fabs(exact), mag * 0.01);
    }
}

TEST(GpuCompare, RankingPrefersMoreExactThenFewerUlps) {
  MatchStats a, b, c;
  a.exact = 10, a.max_ulp = 5;
  b.exact = 12, b.max_ulp = 9;
  c.exact = 12, c.max_ulp = 1;
  const auto r = rank_presets({{"a", a}, {"b", b}, {"c", c}});
  EXPECT_EQ(r[0].preset, "c");
  EXPECT_EQ(r[1].preset, "b");
  EXPECT_EQ(r[2].preset, "a");
}

TEST(GpuCompare, CandidatePresetsParseAndFitTheType) {
  for (const std::string t : {"fp16", "bf16", "tf32", "fp32", "e4m3", "e5m2"})
    for (const auto& p : candidate_presets(format_by_name(t), false)) EXPECT_NO_THROW(parse_accum_model(p)) << p;
  for (const auto& p : candidate_presets(format_by_name("fp16"), true)) {
    const AccumModel m = parse_accum_model(p);
    EXPECT_EQ(m.acc.name, "fp16") << p;
  }
  EXPECT_EQ(candidate_presets(format_by_name("e4m3"), false).front(), "h100-fp8-fast");
}

TEST(GpuCompare, AnEmulatedDeviceMatchesItsOwnPresetAndNotAnother) {
  // The comparison a GPU run makes, with the h100 model standing in for the device.
  const Format f = format_by_name("bf16");
  std::vector<float> a, b;
  make_operands(OperandSet::kAlignment, f, f, 16, 16, 256, 5, a, b);
  GemmArgs ga;
  ga.m = ga.n = 16;
  ga.k = 256;
  ga.a_format = ga.b_format = f;
  std::vector<float> dev(256), h100(256), a100(256);
  gemm(parse_accum_model("h100"), ga, a.data(), b.data(), dev.data());
  gemm(parse_accum_model("h100"), ga, a.data(), b.data(), h100.data());
  gemm(parse_accum_model("a100"), ga, a.data(), b.data(), a100.data());
  const std::vector<double> d(dev.begin(), dev.end()), e1(h100.begin(), h100.end()), e2(a100.begin(), a100.end());
  EXPECT_EQ(compare_results(kFp32, d, e1).exact, 256u);
  const MatchStats other = compare_results(kFp32, d, e2);
  EXPECT_LT(other.exact, 256u);  // the alignment operands tell 24 from 25 fraction bits
  EXPECT_GT(other.max_ulp, 0);
}

}  // namespace
}  // namespace precsim

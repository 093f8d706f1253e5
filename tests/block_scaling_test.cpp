// OCP MX block scaling: worked vectors from the OCP MX specification, microxcaling, torchao and
// gfloat (docs/reference/sources.md, block scaling), the NaN / zero / clamp rules, the scale rules' clipping behaviour,
// the packed layout and the scheme parser.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/train/operand_quant.h"

namespace precsim {
namespace {

std::vector<float> fq(const std::string& scheme, const std::vector<float>& x, BlockStats* st = nullptr,
                      Rounding rounding = Rounding::kNearestEven) {
  BlockScaling s = parse_block_scaling(scheme);
  s.element_options.rounding = rounding;
  std::vector<float> out(x.size());
  block_fake_quantize(s, x, out, 1, x.size(), st);
  return out;
}

uint8_t first_scale_code(const std::string& scheme, const std::vector<float>& x) {
  const BlockScaling s = parse_block_scaling(scheme);
  return block_quantize(s, x, 1, x.size()).scales.at(0);
}

TEST(MxVectors, MicroxcalingE4m3SaturationAndTies) {
  // microxcaling test_fp8_e4m3_fix.py: X = 1; 400 is a tie between 384 and 416.
  const std::vector<float> x = {485, 475, 400, -485, -475, -450, 0x1p-6f, -0x1p-6f};
  EXPECT_EQ(first_scale_code("mxfp8_e4m3", x), 127);
  const std::vector<float> rne = {448, 448, 384, -448, -448, -448, 0x1p-6f, -0x1p-6f};
  const std::vector<float> away = {448, 448, 416, -448, -448, -448, 0x1p-6f, -0x1p-6f};
  EXPECT_EQ(fq("mxfp8_e4m3", x), rne);
  EXPECT_EQ(fq("mxfp8_e4m3", x, nullptr, Rounding::kNearestAway), away);
}

TEST(MxVectors, MicroxcalingIssue4FloorSaturates) {
  // 957 in a block whose amax is 960: X = 2, 478.5 saturates to 448 -> 896 (the spec's rule).
  BlockStats st;
  const auto q = fq("mxfp8_e4m3", {957, 960, 1}, &st);
  EXPECT_EQ(q[0], 896);
  EXPECT_EQ(q[1], 896);
  EXPECT_EQ(q[2], 1);
  EXPECT_EQ(st.clipped_blocks, 1u);
  EXPECT_EQ(st.saturated, 2u);
  // rceil picks X = 4 (960/448 = 2.14 -> 4): 957/4 = 239.25 -> 240 -> 960; nothing clips.
  BlockStats st2;
  const auto r = fq("mxfp8_e4m3:rule=rceil", {957, 960, 1}, &st2);
  EXPECT_EQ(r[0], 960);
  EXPECT_EQ(st2.clipped_blocks, 0u);
}

TEST(MxVectors, TorchaoIssue436E5m2) {
  std::vector<float> x;
  for (int k = 1; k <= 31; ++k) x.push_back(static_cast<float>(k));
  x.push_back(127.9999f);
  EXPECT_EQ(first_scale_code("mxfp8_e5m2", x), 118);  // X = 2^-9
  const auto q = fq("mxfp8_e5m2", x);
  EXPECT_EQ(q[31], 112.0f);  // 65535.95 > 57344 clamps: 57344 * 2^-9
  EXPECT_EQ(q[0], 1.0f);
  EXPECT_EQ(q[30], 32.0f);  // 31 * 512 = 15872 lies between 14336 and 16384 -> 16384
}

TEST(MxVectors, ReferenceNotesWorkedExamples) {
  EXPECT_EQ(first_scale_code("mxfp4", {3.0f, 0.3f, -1.1f}), 126);
  EXPECT_EQ(fq("mxfp4", {3.0f, 0.3f, -1.1f}), (std::vector<float>{3.0f, 0.25f, -1.0f}));
  EXPECT_EQ(fq("mxint8", {1.0f, 0.5f, -0.3f}), (std::vector<float>{1.0f, 0.5f, -19.0f / 64}));
  EXPECT_EQ(first_scale_code("mxfp8_e4m3", {1.9f * 32}), 124);  // X = 2^-3
  EXPECT_EQ(fq("mxfp8_e4m3", {1.9f * 32}), (std::vector<float>{56.0f}));
}

TEST(MxVectors, GfloatTorchaoRampMxfp4AndMxfp6) {
  // A = k/2 - 5, k = 0..31 (the gfloat / torchao MX ramp, docs/reference/sources.md), one block of 32.
  std::vector<float> a;
  for (int k = 0; k < 32; ++k) a.push_back(k / 2.0f - 5);
  EXPECT_EQ(first_scale_code("mxfp4", a), 128);        // 2^1
  EXPECT_EQ(first_scale_code("mxfp6_e3m2", a), 126);   // 2^-1
  const auto q4 = fq("mxfp4", a);
  const auto q6 = fq("mxfp6_e3m2", a);
  auto at = [&](const std::vector<float>& q, float v) { return q[static_cast<size_t>((v + 5) * 2)]; };
  const std::pair<float, float> e2m1[] = {{-5, -4}, {-4.5, -4}, {-3.5, -4}, {-2.5, -2}, {-1.5, -2},
                                          {-0.5, -0.0f}, {0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4},
                                          {4.5, 4}, {5, 4}, {5.5, 6}, {6.5, 6}, {7, 8}, {7.5, 8},
                                          {9.5, 8}, {10, 8}, {10.5, 12}};
  for (auto [in, want] : e2m1) EXPECT_EQ(at(q4, in), want) << "mxfp4 " << in;
  EXPECT_TRUE(std::signbit(at(q4, -0.5f)));
  const std::pair<float, float> e3m2[] = {{-5, -5}, {-4.5, -4}, {5.5, 6}, {6.5, 6},
                                          {7.5, 8}, {9, 8},     {9.5, 10}, {10.5, 10}};
  for (auto [in, want] : e3m2) EXPECT_EQ(at(q6, in), want) << "mxfp6_e3m2 " << in;
}

TEST(MxVectors, MxInt8RoundingRowsAndNoMinusTwo) {
  // microxcaling test_mx_hw_test rows: ties away from zero, saturation at 127/64.
  const std::vector<float> x = {1.0234375f, 1.9921875f, -1.9921875f, 0.5f};
  EXPECT_EQ(fq("mxint8", x, nullptr, Rounding::kNearestAway),
            (std::vector<float>{1.03125f, 1.984375f, -1.984375f, 0.5f}));
  // -1.999 * 64 = -127.9 would round to -128 (-2.0), which MXINT8 never uses.
  EXPECT_EQ(fq("mxint8", {-1.999f, 1.0f}), (std::vector<float>{-1.984375f, 1.0f}));
}

TEST(MxSpecialBlocks, NanInfZeroAndClamps) {
  const float nan = NAN, inf = INFINITY;
  for (const char* scheme : {"mxfp8_e4m3", "mxfp4", "mxint8", "mxfp8_e5m2"}) {
    // A NaN or Inf anywhere makes the block NaN (scale 0xFF); the next block is untouched.
    std::vector<float> x(64, 1.0f);
    x[3] = nan;
    x[40] = inf;
    BlockStats st;
    std::vector<float> x2(64, 1.0f);
    x2[3] = nan;
    const auto q = fq(std::string(scheme) + ":block=32", x2, &st);
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(q[i])) << scheme;
    for (int i = 32; i < 64; ++i) EXPECT_EQ(q[i], 1.0f) << scheme;
    EXPECT_EQ(st.nonfinite_blocks, 1u);
    EXPECT_EQ(st.nonfinite_inputs, 1u);
    const BlockScaling s = parse_block_scaling(scheme);
    const BlockPacked p = block_quantize(s, x, 1, 64);
    EXPECT_EQ(p.scales[0], 0xff);
    EXPECT_EQ(p.scales[1], 0xff);
    // All zeros: the smallest scale, 2^-127, and zeros (with their signs) out.
    const std::vector<float> z = {0.0f, -0.0f, 0.0f};
    EXPECT_EQ(first_scale_code(scheme, z), 0);
    const auto qz = fq(scheme, z);
    EXPECT_EQ(qz[0], 0.0f);
    EXPECT_EQ(qz[1], 0.0f);
    // -0 survives where the element format has it (MXINT8's int8 has no negative zero).
    EXPECT_EQ(std::signbit(qz[1]), s.element.has_negative_zero()) << scheme;
  }
  // The shared exponent clamps at -127: in a block of FP32 subnormals the scale stays 2^-127;
  // values from E4M3's smallest subnormal times 2^-127 (2^-136) up survive, smaller ones flush.
  EXPECT_EQ(first_scale_code("mxfp8_e4m3", {0x1p-134f}), 0);
  EXPECT_EQ(fq("mxfp8_e4m3", {0x1p-134f, 0x1.8p-133f, 0x1p-149f}),
            (std::vector<float>{0x1p-134f, 0x1.8p-133f, 0.0f}));
  // Near FLT_MAX, ceil on MXINT8 (emax 0) asks for 2^128: clamped to 2^127 and saturating.
  EXPECT_EQ(first_scale_code("mxint8:rule=ceil", {3e38f}), 254);
}

TEST(MxScaleRules, EachRuleOnOneBlock) {
  // amax = 1.9 * 2^5 = 60.8 (E4M3, emax 8, max 448, mantissa width 3).
  const std::vector<float> x = {60.8f};
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=floor", x), 127 + 5 - 8);
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=ceil", x), 127 + 6 - 8);
  // even: 1.9 rounds to 2.0 at 3 mantissa bits (>= 1.9375? no: 1.9 < 1.9375) -> stays in 2^5.
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=even", x), 127 + 5 - 8);
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=even", {1.95f * 32}), 127 + 6 - 8);
  // rceil: 60.8 / 448 = 0.1357 -> 2^-2.
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=rceil", x), 127 - 2);
  // rceil at an exact power of two: amax = 448 * 2^3 -> exactly 2^3.
  EXPECT_EQ(first_scale_code("mxfp8_e4m3:rule=rceil", {3584.0f}), 130);
}

// The theory checks of the issue on Gaussian blocks of 32.
struct Gauss {
  std::vector<float> x;
  explicit Gauss(size_t n, uint64_t seed = 7) : x(n) { fill_normal(x, seed, 1); }
};

TEST(MxScaleRules, RceilNeverClipsFloorBoundsTheBlockMaximumError) {
  const Gauss g(32 * 4096);
  struct Case {
    const char* elem;
    double floor_bound;
  };
  for (const Case c : {Case{"mxfp8_e4m3", 0.125}, Case{"mxfp8_e5m2", 0.125}, Case{"mxfp6_e3m2", 0.125},
                       Case{"mxfp6_e2m3", 0.0625}, Case{"mxfp4", 0.25}, Case{"mxint8", 0.0079}}) {
    BlockStats st;
    std::vector<float> q = fq(std::string(c.elem) + ":rule=rceil", g.x, &st);
    EXPECT_EQ(st.clipped_blocks, 0u) << c.elem;
    EXPECT_EQ(st.saturated, 0u) << c.elem;
    // Floor: the relative error on each block's maximum stays within 1 - max/2^(emax+1); and the
    // clipped blocks are exactly those whose amax mantissa exceeds max_elem / 2^emax.
    BlockStats sf;
    q = fq(c.elem, g.x, &sf);
    const BlockScaling s = parse_block_scaling(c.elem);
    const double threshold = s.max_elem() / std::ldexp(1.0, s.emax_elem());
    uint64_t expect_clipped = 0;
    double worst = 0;
    for (size_t b = 0; b < g.x.size(); b += 32) {
      size_t imax = b;
      for (size_t i = b; i < b + 32; ++i)
        if (std::fabs(g.x[i]) > std::fabs(g.x[imax])) imax = i;
      const double a = std::fabs(g.x[imax]);
      const double mant = a / std::ldexp(1.0, std::ilogb(a));
      expect_clipped += mant > threshold;
      worst = std::max(worst, std::fabs(q[imax] - g.x[imax]) / a);
    }
    EXPECT_LE(worst, c.floor_bound) << c.elem;
    EXPECT_EQ(sf.clipped_blocks, expect_clipped) << c.elem;
    EXPECT_EQ(sf.blocks, 4096u);
  }
}

// Under the floor rule a block clips when its largest magnitude M has a significand M / 2^floor(log2 M)
// above t = max_elem / 2^emax_elem (1.75 for E4M3, 1.5 for E2M1). For blocks of 32 standard normal
// values P(M <= x) = erf(x / sqrt 2)^32, so the clipped fraction is
// sum over k of P(M < 2^(k+1)) - P(M <= t 2^k): 0.16900 for E4M3, 0.29603 for E2M1.
double clipped_fraction_closed_form(double t) {
  auto cdf = [](double x) { return std::pow(std::erf(x / std::sqrt(2.0)), 32); };
  double p = 0;
  for (int k = -60; k <= 10; ++k) p += cdf(std::ldexp(2.0, k)) - cdf(std::ldexp(t, k));
  return p;
}

TEST(MxScaleRules, ClippedFractionOnGaussianBlocksIsTheClosedForm) {
  EXPECT_NEAR(clipped_fraction_closed_form(1.75), 0.16900, 5e-6);
  EXPECT_NEAR(clipped_fraction_closed_form(1.5), 0.29603, 5e-6);
  // 200000 blocks: the sampling standard deviation is sqrt(p (1 - p) / 200000), 8.4e-4 and
  // 1.0e-3; the bound is 4 of them.
  const size_t blocks = 200000;
  const Gauss g(32 * blocks, 11);
  for (const auto& [scheme, t] : {std::pair{"mxfp8_e4m3", 1.75}, std::pair{"mxfp4", 1.5}}) {
    BlockStats st;
    fq(scheme, g.x, &st);
    ASSERT_EQ(st.blocks, blocks);
    const double p = clipped_fraction_closed_form(t), got = double(st.clipped_blocks) / double(st.blocks);
    std::printf("%s: clipped %.5f, closed form %.5f, 4 sigma %.5f\n", scheme, got, p, 4 * std::sqrt(p * (1 - p) / blocks));
    EXPECT_NEAR(got, p, 4 * std::sqrt(p * (1 - p) / blocks)) << scheme;
  }
}

std::vector<float> fq2(const BlockScaling& s, const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<float> out(x.size());
  block_fake_quantize(s, x, out, rows, cols);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(BlockRoundTrip, IdempotentAndPackedMatchesFakeQuant) {
  const size_t rows = 70, cols = 90;  // partial edge blocks both ways
  Gauss g(rows * cols, 5);
  g.x[17] = 0;
  g.x[300] = 1e-30f;
  for (const char* scheme :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8", "mxfp4:rule=rceil",
        "mxfp8_e4m3:rule=ceil", "mxfp8_e4m3:rule=even", "mxfp4:2d", "nvfp4", "nvfp4:2d",
        "fp8_e4m3:tensor", "fp8_e4m3:row", "fp8_e4m3:tile128", "fp8_e4m3:block128",
        "fp8_e5m2:tensor:pow2", "e4m3", "bf16"}) {
    for (int axis : {1, 0}) {
      BlockScaling s = parse_block_scaling(scheme);
      s.axis = axis;
      const auto q = fq2(s, g.x, rows, cols);
      const BlockPacked p = block_quantize(s, g.x, rows, cols);
      std::vector<float> d(rows * cols);
      block_dequantize(s, p, d);
      EXPECT_TRUE(same_bits(q, d)) << scheme << " axis " << axis;
      const bool pow2_scales = s.scale_format == ScaleFormat::kE8M0 || s.scale_format == ScaleFormat::kPow2Fp32 ||
                               s.is_plain();
      if (pow2_scales) {
        EXPECT_TRUE(same_bits(fq2(s, q, rows, cols), q)) << scheme << " axis " << axis;
      }
    }
  }
}

// A custom element spelling whose encoding is a preset's is that preset wherever the preset is
// accepted: "e4m3:nanonly" is float8_e4m3fn, so "e4m3:nanonly:mx" is mxfp8_e4m3, value for value,
// code for code, scale for scale (the scheme keeps the name it was written with).
TEST(BlockScheme, CustomSpellingOfAnMxElementIsThatElement) {
  const size_t rows = 40, cols = 100;
  Gauss g(rows * cols, 23);
  const std::pair<const char*, const char*> kSame[] = {
      {"mxfp8_e4m3", "e4m3:nanonly:mx"},       {"mxfp8_e4m3", "float8_e4m3fn:mx"},
      {"mxfp8_e5m2", "e5m2:bias=15:ieee:mx"},  {"mxfp6_e2m3", "e2m3:finite:mx"},
      {"mxfp6_e3m2", "e3m2:bias=3:finite:mx"}, {"mxfp4", "e2m1:finite:mx"},
      {"mxint8", "i8:mx"},                     {"nvfp4", "e2m1:finite:nvfp4"},
      {"mxfp8_e4m3:rule=rceil", "e4m3:nanonly:mx:rule=rceil"},
      {"mxfp4:block=16:2d", "e2m1:finite:mx:block=16:2d"}};
  for (const auto& [preset, custom] : kSame) {
    const BlockScaling a = parse_block_scaling(preset), b = parse_block_scaling(custom);
    EXPECT_EQ(b.name, custom);
    EXPECT_TRUE(same_encoding(a.element, b.element)) << custom;
    EXPECT_EQ(std::tie(a.rule, a.scale_format, a.block_along, a.block_across),
              std::tie(b.rule, b.scale_format, b.block_along, b.block_across)) << custom;
    for (int axis : {1, 0}) {
      BlockScaling sa = a, sb = b;
      sa.axis = sb.axis = axis;
      BlockStats st_a, st_b;
      std::vector<float> qa(rows * cols), qb(rows * cols);
      block_fake_quantize(sa, g.x, qa, rows, cols, &st_a);
      block_fake_quantize(sb, g.x, qb, rows, cols, &st_b);
      EXPECT_TRUE(same_bits(qa, qb)) << custom << " axis " << axis;
      EXPECT_EQ(st_a.clipped_blocks, st_b.clipped_blocks) << custom;
      const BlockPacked pa = block_quantize(sa, g.x, rows, cols), pb = block_quantize(sb, g.x, rows, cols);
      EXPECT_EQ(pa.codes, pb.codes) << custom << " axis " << axis;
      EXPECT_EQ(pa.scales, pb.scales) << custom << " axis " << axis;
    }
  }
  EXPECT_EQ(mx_scheme_name(format_by_name("e4m3:nanonly")), "mxfp8_e4m3");
  EXPECT_EQ(mx_scheme_name(format_by_name("e2m1:finite")), "mxfp4");
  EXPECT_EQ(format_by_name("e4m3:nanonly").name, "e4m3:nanonly");
  EXPECT_FALSE(mx_scheme_name(format_by_name("e4m3:ieee")));  // float8_e4m3, not an MX element
  EXPECT_FALSE(mx_scheme_name(format_by_name("e4m3:nanonly:bias=8")));
}

// A training recipe's operand in a custom spelling of an MX element gets the MX preset's scheme
// (it was refused as "not an MX element format" when the element was looked up by name).
TEST(BlockScheme, TrainingOperandInACustomSpellingOfAnMxElement) {
  OperandSpec op;
  op.fmt.name = "e4m3:nanonly";
  op.fmt.format = format_by_name(op.fmt.name);
  op.scaling = Scaling::kMx;
  op.block = 32;
  EXPECT_EQ(operand_scheme(op, 0), "mxfp8_e4m3");
  op.fmt.format = format_by_name("e2m1:finite");
  op.scaling = Scaling::kNvfp4;
  EXPECT_EQ(operand_scheme(op, 0), "nvfp4");
  op.fmt.format = format_by_name("e4m3:ieee");
  op.scaling = Scaling::kMx;
  EXPECT_THROW(operand_scheme(op, 0), std::invalid_argument);
}

TEST(BlockScheme, MxAndNvfp4OfOtherElementsAreRefused) {
  auto message = [](const char* scheme) {
    try {
      parse_block_scaling(scheme);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("e4m3:ieee:mx").find("is not an MX element; MX elements: e4m3"), std::string::npos);
  EXPECT_NE(message("e4m3:nvfp4").find("nvfp4 needs an E2M1 element"), std::string::npos);
  EXPECT_NE(message("mxfp4:mx").find("applies to an element format, not to the preset mxfp4"), std::string::npos);
  EXPECT_NE(message("mxfp4:block128").find("not to the preset mxfp4"), std::string::npos);  // was ignored
  EXPECT_NE(message("e4m3:mx:tensor").find("mx and nvfp4 exclude tensor"), std::string::npos);
  EXPECT_NE(message("e4m3:mx:nvfp4").find("exclude each other"), std::string::npos);
  EXPECT_NE(message("e4m3:tensor:rule=floor").find("rule= applies to MX schemes only"), std::string::npos);
}

TEST(BlockLayout, AxisAndPackingFollowTheDocumentedLayout) {
  // 2 x 4 array, blocks of 2, E2M1: axis 1 stores rows; axis 0 stores the transpose.
  const std::vector<float> x = {1, 2, 3, 4, 0.5, 1.5, 6, -6};
  BlockScaling s = parse_block_scaling("mxfp4:block=2");
  const BlockPacked r = block_quantize(s, x, 2, 4);
  EXPECT_EQ(r.scale_rows, 2u);
  EXPECT_EQ(r.scale_cols, 2u);
  EXPECT_EQ(r.code_row_bytes, 2u);
  // Row 0 blocks: {1,2} amax 2 -> X = 2^(1-2) = 0.5: codes 2.0 (0x4), 4.0 (0x6); {3,4}: X = 1:
  // 3.0 (0x5), 4.0 (0x6). Low nibble first.
  EXPECT_EQ(r.codes[0], 0x64);
  EXPECT_EQ(r.codes[1], 0x65);
  EXPECT_EQ(r.scales[0], 126);
  EXPECT_EQ(r.scales[1], 127);
  s.axis = 0;
  const BlockPacked c = block_quantize(s, x, 2, 4);
  EXPECT_EQ(c.scale_rows, 4u);  // one block per column
  EXPECT_EQ(c.scale_cols, 1u);
  EXPECT_EQ(c.code_row_bytes, 1u);
  // Column 0 = {1, 0.5}: amax 1 -> X = 2^-2: 4.0 (0x6), 2.0 (0x4).
  EXPECT_EQ(c.codes[0], 0x46);
  EXPECT_EQ(c.scales[0], 125);
  // Column 3 = {4, -6}: amax 6 -> X = 1: 4.0 (0x6), -6 (0xf).
  EXPECT_EQ(c.codes[3], 0xf6);
}

TEST(BlockLayout, CublasSwizzle) {
  // 130 x 5 scales: padded to 256 x 8, i.e. 2 x 2 tiles of 512 bytes.
  std::vector<uint8_t> s(130 * 5);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(i % 251 + 1);
  const auto z = swizzle_scales_cublas(s, 130, 5);
  ASSERT_EQ(z.size(), 4u * 512);
  auto at = [&](size_t r, size_t c) { return s[r * 5 + c]; };
  EXPECT_EQ(z[0], at(0, 0));
  EXPECT_EQ(z[1], at(0, 1));
  EXPECT_EQ(z[4], at(32, 0));      // (r / 32) * 4
  EXPECT_EQ(z[16], at(1, 0));      // (r % 32) * 16
  EXPECT_EQ(z[16 * 5 + 4 * 3 + 2], at(5 + 96, 2));
  EXPECT_EQ(z[512], at(0, 4));     // second tile of the first tile row
  EXPECT_EQ(z[513], 0);            // padding
  EXPECT_EQ(z[1024 + 16], at(129, 0));
}

TEST(BlockScheme, ParsesPresetsOptionsAndRejectsNonsense) {
  const BlockScaling m = parse_block_scaling("mxfp8_e4m3");
  EXPECT_EQ(m.element.name, "float8_e4m3fn");
  EXPECT_EQ(m.rule, ScaleRule::kFloor);
  EXPECT_EQ(m.block_along, 32);
  EXPECT_DOUBLE_EQ(m.bits_per_element(64, 64), 8.25);
  EXPECT_EQ(m.emax_elem(), 8);
  const BlockScaling i = parse_block_scaling("mxint8");
  EXPECT_EQ(i.emax_elem(), 0);
  EXPECT_DOUBLE_EQ(i.max_elem(), 127.0 / 64);
  const BlockScaling r = parse_block_scaling("mxfp4:rule=rceil:block=16:axis=0");
  EXPECT_EQ(r.rule, ScaleRule::kRceil);
  EXPECT_EQ(r.block_along, 16);
  EXPECT_EQ(r.axis, 0);
  EXPECT_EQ(r.name, "mxfp4:rule=rceil:block=16:axis=0");
  const BlockScaling n = parse_block_scaling("nvfp4:2d");
  EXPECT_EQ(n.block_across, 16);
  EXPECT_DOUBLE_EQ(n.bits_per_element(1024, 1024), 4 + 8.0 / 256 + 32.0 / (1024 * 1024));  // + FP32 tensor scale
  const BlockScaling t = parse_block_scaling("fp8_e4m3:tile128");
  EXPECT_EQ(t.rule, ScaleRule::kAmax);
  EXPECT_EQ(t.block_along, 128);
  EXPECT_EQ(t.block_across, 1);
  const BlockScaling b = parse_block_scaling("fp8_e5m2:block128:pow2");
  EXPECT_EQ(b.block_across, 128);
  EXPECT_EQ(b.scale_format, ScaleFormat::kPow2Fp32);
  EXPECT_EQ(parse_block_scaling("e4m3").rule, ScaleRule::kNone);
  EXPECT_EQ(parse_block_scaling("e5m3:bias=9:tensor").element.bias, 9);
  for (const char* bad : {"mxfp9", "mxfp4:rule=round", "mxfp4:block=0", "mxfp4:axis=2", "e4m3:rule=floor",
                          "fp8_e4m3:tensor:rule=rceil", "mxfp4:pow2", "fp8_e4m3:tensorx", "nvfp4:foo",
                          "fp8_e4m3:tile0", "fp32:tensor"}) {
    EXPECT_THROW(parse_block_scaling(bad), std::invalid_argument) << bad;
  }
  try {
    parse_block_scaling("mxfp4:rule=round");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("floor, ceil, even, rceil"), std::string::npos);
  }
}

TEST(BlockStatsTest, FlushedAndErrorStatistics) {
  // One block: amax 448 * 2^10 puts 1.0 below E4M3's smallest subnormal times X = 4: flushed.
  BlockStats st;
  const auto q = fq("mxfp8_e4m3", {458752.0f, 1.0f, 0.0f}, &st);
  EXPECT_EQ(q[1], 0.0f);
  EXPECT_EQ(st.flushed, 1u);
  const ErrorStats e = error_stats(std::vector<float>{458752.0f, 1.0f, 0.0f}, q);
  EXPECT_EQ(e.flushed, 1u);
  EXPECT_EQ(e.nonzero_inputs, 2u);
  EXPECT_DOUBLE_EQ(e.max_rel_error, 1.0);
  EXPECT_DOUBLE_EQ(e.noise_power, 1.0);
  EXPECT_NEAR(e.qsnr_db, 10 * std::log10(458752.0 * 458752.0 + 1), 1e-9);
  EXPECT_EQ(st.scale_log2_histogram.at(10), 1u);
}

}  // namespace
}  // namespace precsim

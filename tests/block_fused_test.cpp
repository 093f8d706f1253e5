// The fused, vectorised block quantization (block_fake_quantize) gives the same bits and the same
// statistics as the scalar reference (block_fake_quantize_reference) on every Highway target
// compiled into the binary: MX (every element format, every scale rule, rows, columns and 2-D
// blocks), NVFP4 (1x16 and 16x16, both axes, tensor amax given or not, with and without the random
// Hadamard transform fused in front), FP8 per-tensor / row /
// tile / block recipes (FP32 and power-of-two scales, both axes), plain formats; random blocks
// and adversarial ones (all-zero, NaN, Inf, subnormal amax, amax at and beside powers of two and
// at the rule thresholds, values that clip, values near FLT_MAX); every rounding mode.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/hadamard.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

struct Shape {
  size_t rows, cols;
};

// Block extent in array coordinates (as block_geometry): rows x cols of one block.
Shape block_shape(const BlockScaling& s, size_t rows, size_t cols) {
  if (s.is_plain()) return {rows, cols};
  const size_t along_n = s.axis == 1 ? cols : rows, across_n = s.axis == 1 ? rows : cols;
  const size_t a = s.block_along ? s.block_along : along_n, c = s.block_across ? s.block_across : across_n;
  return s.axis == 1 ? Shape{c, a} : Shape{a, c};
}

// Fills one block with data of the kind `kind`; `top` is the value its largest magnitude should
// take for the threshold kinds (max_elem * 2^k, the even rule's threshold, ...).
void fill_block(std::vector<float>& x, size_t cols, size_t r0, size_t r1, size_t c0, size_t c1, int kind,
                const BlockScaling& s, std::mt19937& gen) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> expo(-30, 30);
  const int k = expo(gen);
  const float unit = std::ldexp(1.0f, k);
  std::vector<float*> cells;
  for (size_t r = r0; r < r1; ++r)
    for (size_t c = c0; c < c1; ++c) cells.push_back(&x[r * cols + c]);
  for (float* v : cells) *v = normal(gen) * unit * 0.25f;
  std::uniform_int_distribution<size_t> pick(0, cells.size() - 1);
  float& top = *cells[pick(gen)];
  const double max_elem = s.is_plain() ? s.element.max_finite() : s.max_elem();
  const int mbits = s.element.kind == FormatKind::kInt ? 6 : s.element.man_bits;
  const float sign = gen() & 1 ? -1.0f : 1.0f;
  switch (kind) {
    case 0: break;                                                          // random
    case 1: for (float* v : cells) *v = gen() & 1 ? 0.0f : -0.0f; break;    // all zero
    case 2: top = NAN; break;
    case 3: top = sign * INFINITY; break;
    case 4:  // subnormal amax
      for (float* v : cells) *v = std::bit_cast<float>(static_cast<uint32_t>(gen() & 0x807fffffu));
      break;
    case 5: top = sign * unit; break;                                       // amax a power of two
    case 6: top = sign * static_cast<float>(max_elem * unit); break;        // rceil boundary
    case 7: top = sign * std::nextafter(static_cast<float>(max_elem * unit), INFINITY); break;
    case 8: top = sign * std::nextafter(static_cast<float>(max_elem * unit), 0.0f); break;
    case 9: {  // the even rule's threshold 2 - 2^-(m+1), and one ulp below
      const float t = static_cast<float>((2.0 - std::ldexp(1.0, -(mbits + 1))) * unit);
      top = sign * (gen() & 1 ? t : std::nextafter(t, 0.0f));
      break;
    }
    case 10: top = sign * 3.0e38f; break;                                   // near FLT_MAX
    case 11: top = sign * FLT_MAX; break;
    case 12: top = sign * 1.99f * unit; break;                              // clips under floor
    case 13:  // a wide range inside the block: the small ones flush
      for (float* v : cells) *v = std::ldexp(normal(gen), std::uniform_int_distribution<int>(-140, 100)(gen));
      break;
    case 14: top = sign * std::ldexp(1.5f, -126 - static_cast<int>(gen() % 3)); break;  // amax near 2^-126
    case 15: for (float* v : cells) *v = std::ldexp(normal(gen), -132); break;          // tiny, clamps e at -127
    default: break;
  }
}

constexpr int kKinds = 16;

// An array whose blocks (under s) take every kind in turn, from a seed.
std::vector<float> adversarial(const BlockScaling& s, size_t rows, size_t cols, uint32_t seed) {
  std::vector<float> x(rows * cols);
  const Shape b = block_shape(s, rows, cols);
  std::mt19937 gen(seed);
  int kind = static_cast<int>(seed % kKinds);
  for (size_t r = 0; r < rows; r += b.rows)
    for (size_t c = 0; c < cols; c += b.cols)
      fill_block(x, cols, r, std::min(rows, r + b.rows), c, std::min(cols, c + b.cols), kind++ % kKinds, s, gen);
  return x;
}

std::string stats_text(const BlockStats& s) {
  std::string t;  // appended piecewise (GCC 12's false -Wrestrict on literal + string&&)
  auto add = [&t](const char* key, uint64_t v) { t.append(key).append("=").append(std::to_string(v)).append(" "); };
  add("elements", s.elements);
  add("blocks", s.blocks);
  add("clipped", s.clipped_blocks);
  add("nonfinite_blocks", s.nonfinite_blocks);
  add("saturated", s.saturated);
  add("flushed", s.flushed);
  add("nonfinite", s.nonfinite_inputs);
  t.append("hist");
  for (const auto& [k, v] : s.scale_log2_histogram) t.append(" ").append(std::to_string(k)).append(":").append(std::to_string(v));
  return t;
}

bool same_stats(const BlockStats& a, const BlockStats& b) {
  return a.elements == b.elements && a.blocks == b.blocks && a.clipped_blocks == b.clipped_blocks &&
         a.nonfinite_blocks == b.nonfinite_blocks && a.saturated == b.saturated && a.flushed == b.flushed &&
         a.nonfinite_inputs == b.nonfinite_inputs && a.scale_log2_histogram == b.scale_log2_histogram;
}

// Fast path on every target against the scalar reference, values bit for bit and statistics.
void expect_matches_reference(const BlockScaling& s, const std::vector<float>& x, size_t rows, size_t cols,
                              double tensor_amax = -1, uint64_t index_base = 77) {
  std::vector<float> want(x.size());
  BlockStats want_stats;
  block_fake_quantize_reference(s, x, want, rows, cols, &want_stats, index_base, tensor_amax);
  const std::string what = s.name + " axis=" + std::to_string(s.axis) + " rounding=" +
                           std::string(to_string(s.element_options.rounding)) + " " + std::to_string(rows) +
                           "x" + std::to_string(cols);
  for (const auto& target : quantize_simd_targets()) {
    force_quantize_simd_target(target);
    std::vector<float> got(x.size());
    BlockStats got_stats;
    block_fake_quantize(s, x, got, rows, cols, &got_stats, index_base, tensor_amax);
    std::vector<float> in_place = x;  // and without statistics, in place
    block_fake_quantize(s, in_place, in_place, rows, cols, nullptr, index_base, tensor_amax);
    force_quantize_simd_target("");
    int shown = 0;
    for (size_t i = 0; i < x.size() && shown < 5; ++i) {
      if (bits_of(got[i]) != bits_of(want[i]) || bits_of(in_place[i]) != bits_of(want[i])) {
        ADD_FAILURE() << target << " " << what << ": element " << i << " (row " << i / cols << ") input "
                      << std::hexfloat << x[i] << ": fused " << got[i] << " / in place " << in_place[i]
                      << ", scalar " << want[i];
        ++shown;
      }
    }
    EXPECT_TRUE(same_stats(got_stats, want_stats))
        << target << " " << what << "\n fused  " << stats_text(got_stats) << "\n scalar " << stats_text(want_stats);
    if (shown || !same_stats(got_stats, want_stats)) return;  // one target's failure is enough to read
  }
}

// Shapes with partial edge blocks, a single row, and rows long enough for whole groups of blocks
// (as many blocks as vector lanes) on every target; `big` adds one large enough for the threaded
// path.
void check_scheme(const std::string& scheme, int axis, Rounding rounding = Rounding::kNearestEven,
                  bool big = false) {
  BlockScaling s = parse_block_scaling(scheme);
  s.axis = axis;
  s.element_options.rounding = rounding;
  s.element_options.sr_key = SrKey{0x5eed, 3, 2, 1};
  std::vector<Shape> shapes = {{37, 100}, {1, 300}, {64, 64}, {3, 1100}};
  if (big) shapes.push_back({160, 260});
  uint32_t seed = 1;
  for (const Shape& sh : shapes) {
    expect_matches_reference(s, adversarial(s, sh.rows, sh.cols, seed), sh.rows, sh.cols);
    seed += 7;
  }
}

// "a" + "b" + "c" built by appending (GCC 12 warns falsely on literal + string&&, PR 105651).
std::string join(std::initializer_list<const char*> parts) {
  std::string out;
  for (const char* p : parts) out += p;
  return out;
}

const char* const kMxElements[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8"};
const char* const kRules[] = {"floor", "ceil", "even", "rceil"};

TEST(BlockFused, MxEveryElementRuleAndAxisMatchesScalar) {
  for (const char* e : kMxElements)
    for (const char* r : kRules)
      for (const char* layout : {"", ":2d", ":block=16"})
        for (const int axis : {1, 0}) check_scheme(join({e, ":rule=", r, layout}), axis);
}

TEST(BlockFused, LargeArraysOnTheThreadedPathMatchScalar) {
  for (const char* scheme : {"mxfp8_e4m3", "mxfp4:rule=rceil:2d", "mxint8:rule=even", "nvfp4", "nvfp4:2d",
                             "fp8_e4m3:tile128", "fp8_e5m2:block128:pow2", "fp8_e4m3:tensor"})
    for (const int axis : {1, 0}) check_scheme(scheme, axis, Rounding::kNearestEven, true);
}

TEST(BlockFused, Nvfp4BothBlockShapesAndAxesMatchScalar) {
  for (const char* scheme : {"nvfp4", "nvfp4:2d"})
    for (const int axis : {1, 0}) check_scheme(scheme, axis);
}

TEST(BlockFused, Nvfp4WithAGivenTensorAmaxMatchesScalar) {
  BlockScaling s = parse_block_scaling("nvfp4");
  const auto x = adversarial(s, 48, 96, 3);
  for (const double t : {0.0, 1e-3, 2.5, 1e30, static_cast<double>(FLT_MAX)})
    expect_matches_reference(s, x, 48, 96, t);
}

// NVFP4 data whose blocks stay alive under the tensor scale: the adversarial arrays hold values
// near FLT_MAX, and against such a tensor amax nearly every other block's E4M3 scale is zero. Here
// block maxima span 2^-12 .. 2^6 (subnormal E4M3 scales among them), with an all-zero block, a NaN
// block and an Inf block every few rows; a sign pattern of zeros; and blocks on a grid of quarters
// whose scales are exact (tensor amax 2688, block maxima 6 x 2^k), so that the elements land on
// E2M1's ties.
std::vector<float> live_nvfp4(const BlockScaling& s, size_t rows, size_t cols, uint32_t seed) {
  std::vector<float> x(rows * cols);
  const Shape b = block_shape(s, rows, cols);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> expo(-12, 6);
  size_t k = 0;
  for (size_t r0 = 0; r0 < rows; r0 += b.rows)
    for (size_t c0 = 0; c0 < cols; c0 += b.cols, ++k) {
      const float unit = std::ldexp(1.0f, expo(gen));
      std::uniform_int_distribution<int> quarter(-24, 24);
      for (size_t r = r0; r < std::min(rows, r0 + b.rows); ++r)
        for (size_t c = c0; c < std::min(cols, c0 + b.cols); ++c) {
          float v = normal(gen) * unit;
          if (k % 29 == 3) v = (r + c) % 2 ? 0.0f : -0.0f;
          if (k % 5 == 1) v = static_cast<float>(quarter(gen)) / 4 * unit;  // ties of E2M1 once scaled
          x[r * cols + c] = v;
        }
      float& first = x[r0 * cols + c0];
      if (k % 5 == 1) first = 6 * unit;  // the block scale unit exactly: x * enc = x / unit
      if (k == 0) first = 2688;          // tensor amax 6 x 448: a tensor scale of exactly 1
      if (k % 53 == 7) first = NAN;
      if (k % 61 == 11) first = -INFINITY;
    }
  return x;
}

TEST(BlockFused, Nvfp4OnLiveBlocksMatchesScalar) {
  for (const char* scheme : {"nvfp4", "nvfp4:2d"})
    for (const int axis : {1, 0})
      for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic})
        for (const Shape sh : {Shape{37, 100}, Shape{64, 64}, Shape{160, 256}, Shape{3, 1104}}) {
          BlockScaling s = parse_block_scaling(scheme);
          s.axis = axis;
          s.element_options.rounding = r;
          s.element_options.sr_key = SrKey{0x5eed, 3, 2, 1};
          const auto x = live_nvfp4(s, sh.rows, sh.cols, static_cast<uint32_t>(sh.rows * 7 + sh.cols));
          expect_matches_reference(s, x, sh.rows, sh.cols);
          expect_matches_reference(s, x, sh.rows, sh.cols, 3.0);  // a tensor amax given
        }
}

TEST(BlockFused, Fp8RecipesMatchScalar) {
  for (const char* f : {"fp8_e4m3", "fp8_e5m2"})
    for (const char* g : {":tensor", ":row", ":tile128", ":block128", ":tile16", ":block8"})
      for (const char* o : {"", ":pow2", ":eps=1e-3:margin=2"})
        for (const int axis : {1, 0}) check_scheme(join({f, g, o}), axis);
}

TEST(BlockFused, BlocksLargerThanATileMatchScalar) {
  // Rows of 70000 (per-row) and columns of 70000 (per-column) exceed one fused tile.
  for (const int axis : {1, 0}) {
    BlockScaling s = parse_block_scaling("fp8_e4m3:row");
    s.axis = axis;
    const size_t rows = axis == 1 ? 3 : 70000, cols = axis == 1 ? 70000 : 3;
    expect_matches_reference(s, adversarial(s, rows, cols, 9), rows, cols);
  }
  BlockScaling big = parse_block_scaling("mxfp8_e4m3:block=300:2d");
  expect_matches_reference(big, adversarial(big, 610, 301, 4), 610, 301);
}

TEST(BlockFused, PlainFormatsMatchScalar) {
  for (const char* f : {"e4m3", "e2m1", "bf16", "int8"}) check_scheme(f, 1);
}

TEST(BlockFused, EveryRoundingModeMatchesScalar) {
  for (const Rounding r : {Rounding::kNearestAway, Rounding::kTowardZero, Rounding::kUp, Rounding::kDown,
                           Rounding::kOdd, Rounding::kStochastic})
    for (const char* scheme : {"mxfp8_e4m3", "mxfp4:2d", "mxint8", "nvfp4", "fp8_e4m3:row", "fp8_e5m2:block128"})
      for (const int axis : {1, 0}) check_scheme(scheme, axis, r);
}

TEST(BlockFused, RowsCrossingAStochasticStreamBoundaryMatchScalar) {
  // Element indices cross 2^32 inside a row: the row is rounded in two pieces there, the second
  // not starting on a block's vector.
  for (const char* scheme : {"mxfp8_e4m3", "mxfp4:block=16", "nvfp4", "fp8_e4m3:tile128"})
    for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
      BlockScaling s = parse_block_scaling(scheme);
      s.element_options.rounding = r;
      s.element_options.sr_key = SrKey{0x5eed, 3, 2, 1};
      expect_matches_reference(s, adversarial(s, 5, 1100, 8), 5, 1100, -1, (uint64_t{1} << 32) - 2203);
    }
}

TEST(BlockFused, AnyThreadCountGivesTheSameBits) {
  BlockScaling s = parse_block_scaling("mxfp8_e4m3");
  s.element_options.rounding = Rounding::kStochastic;
  const auto x = adversarial(s, 256, 1000, 5);
  std::vector<float> want(x.size());
  BlockStats want_stats;
  block_fake_quantize_reference(s, x, want, 256, 1000, &want_stats);
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> got(x.size());
    BlockStats st;
    block_fake_quantize(s, x, got, 256, 1000, &st);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << threads << " threads";
    EXPECT_TRUE(same_stats(st, want_stats)) << threads << " threads";
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(BlockFused, Nvfp4AndItsTransformGiveTheSameBitsOnAnyThreadCount) {
  const std::vector<double> signs = hadamard_signs(16, 4);
  for (const int axis : {1, 0}) {
    BlockScaling s = parse_block_scaling("nvfp4");
    s.axis = axis;
    s.element_options.rounding = Rounding::kStochastic;
    const auto x = live_nvfp4(s, 256, 1024, 6);
    std::vector<float> want(x.size()), want_rht(x.size());
    BlockStats want_stats, want_rht_stats;
    omp_set_num_threads(1);
    block_fake_quantize(s, x, want, 256, 1024, &want_stats);
    rht_block_fake_quantize(s, signs, x, want_rht, 256, 1024, &want_rht_stats);
    for (const int threads : {2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> got(x.size()), got_rht(x.size());
      BlockStats st, st_rht;
      block_fake_quantize(s, x, got, 256, 1024, &st);
      rht_block_fake_quantize(s, signs, x, got_rht, 256, 1024, &st_rht);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << threads << " threads";
      EXPECT_EQ(0, std::memcmp(got_rht.data(), want_rht.data(), got.size() * sizeof(float))) << threads << " threads";
      EXPECT_TRUE(same_stats(st, want_stats) && same_stats(st_rht, want_rht_stats)) << threads << " threads";
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

// rht_block_fake_quantize (NVFP4: the transform and the block maxima in one pass, the element pass
// in place) against what it stands for: random_hadamard_transform into a copy, then the scalar
// reference of block quantization. Bits and statistics on every target, both axes, nearest and
// stochastic rounding, NaN, Inf and zero blocks, SR indices crossing a stream boundary, out
// aliasing in; the schemes it does not fuse (16x16 blocks, MX, 4/6) through the two calls.
TEST(BlockFused, TransformThenQuantizeInOnePassMatchesTheTwoStepsOnTheScalarPath) {
  const std::vector<double> signs = hadamard_signs(16, 9);
  struct Case {
    size_t rows, cols;
    uint64_t index_base;
  };
  for (const char* scheme : {"nvfp4", "nvfp4:2d", "mxfp4", "nvfp4:4over6"})
    for (const int axis : {1, 0})
      for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic})
        for (const Case c : {Case{64, 64, 7}, Case{32, 112, 7}, Case{160, 256, 7}, Case{16, 1104, (uint64_t{1} << 32) - 3000}}) {
          BlockScaling s = parse_block_scaling(scheme);
          s.axis = axis;
          s.element_options.rounding = r;
          s.element_options.sr_key = SrKey{0x5eed, 3, 2, 1};
          const auto x = std::string(scheme).starts_with("nvfp4") ? live_nvfp4(s, c.rows, c.cols, static_cast<uint32_t>(c.rows + c.cols))
                                                                  : adversarial(s, c.rows, c.cols, static_cast<uint32_t>(c.rows + c.cols));
          std::vector<float> t = x, want(x.size());
          BlockStats want_stats;
          random_hadamard_transform(std::span<float>(t), c.rows, c.cols, axis, signs);
          block_fake_quantize_reference(s, t, want, c.rows, c.cols, &want_stats, c.index_base);
          const std::string what = std::string(scheme) + " axis=" + std::to_string(axis) + " " +
                                   std::string(to_string(r)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols);
          for (const auto& target : quantize_simd_targets()) {
            force_quantize_simd_target(target);
            std::vector<float> got(x.size()), in_place = x;
            BlockStats got_stats;
            rht_block_fake_quantize(s, signs, x, got, c.rows, c.cols, &got_stats, c.index_base);
            rht_block_fake_quantize(s, signs, in_place, in_place, c.rows, c.cols, nullptr, c.index_base);
            force_quantize_simd_target("");
            size_t bad = x.size();
            for (size_t i = 0; i < x.size() && bad == x.size(); ++i)
              if (bits_of(got[i]) != bits_of(want[i]) || bits_of(in_place[i]) != bits_of(want[i])) bad = i;
            ASSERT_EQ(bad, x.size()) << target << " " << what << ": element " << bad << " " << std::hexfloat
                                     << got[bad] << " / in place " << in_place[bad] << ", two steps " << want[bad];
            ASSERT_TRUE(same_stats(got_stats, want_stats)) << target << " " << what << "\n one pass  "
                                                            << stats_text(got_stats) << "\n two steps "
                                                            << stats_text(want_stats);
          }
        }
}

TEST(BlockFused, TransformThenQuantizeRefusesASizeThatDoesNotDivideTheAxis) {
  const BlockScaling s = parse_block_scaling("nvfp4");
  std::vector<float> x(24 * 16), out(x.size());
  try {
    rht_block_fake_quantize(s, hadamard_signs(16, 1), x, out, 16, 24);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("size 16 does not divide the reduction dimension 24"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rht_block_fake_quantize(s, std::vector<double>(12, 1.0), x, out, 16, 24), std::invalid_argument);
}

// block_quantize (fused path, codes from a table of the format's values) against the scalar
// encoder, every target: codes, scales and layout.
void expect_packed_matches_reference(const BlockScaling& s, const std::vector<float>& x, size_t rows, size_t cols,
                                     uint64_t index_base = 5) {
  const BlockPacked want = block_quantize_reference(s, x, rows, cols, nullptr, index_base);
  for (const auto& target : quantize_simd_targets()) {
    force_quantize_simd_target(target);
    const BlockPacked got = block_quantize(s, x, rows, cols, nullptr, index_base);
    force_quantize_simd_target("");
    const std::string what = target + " " + s.name + " axis=" + std::to_string(s.axis) + " rounding=" +
                             std::string(to_string(s.element_options.rounding));
    EXPECT_EQ(got.code_row_bytes, want.code_row_bytes) << what;
    EXPECT_EQ(got.scale_rows, want.scale_rows) << what;
    EXPECT_EQ(got.scale_cols, want.scale_cols) << what;
    EXPECT_EQ(bits_of(got.tensor_scale), bits_of(want.tensor_scale)) << what;
    EXPECT_EQ(got.scales, want.scales) << what;
    ASSERT_EQ(got.codes.size(), want.codes.size()) << what;
    int shown = 0;
    for (size_t i = 0; i < got.codes.size() && shown < 5; ++i)
      if (got.codes[i] != want.codes[i]) {
        ADD_FAILURE() << what << ": code byte " << i << " fused " << int{got.codes[i]} << ", scalar " << int{want.codes[i]};
        ++shown;
      }
    if (shown) return;
  }
}

TEST(BlockFused, PackedCodesAndScalesMatchScalar) {
  std::vector<std::string> schemes;
  for (const char* e : kMxElements)
    for (const char* r : kRules) schemes.push_back(join({e, ":rule=", r}));
  for (const char* x : {"mxfp4:2d", "nvfp4", "nvfp4:2d", "fp8_e4m3:row", "fp8_e5m2:tile128:pow2", "fp8_e4m3:block128",
                        "fp8_e4m3:tensor", "e4m3", "e2m1", "int8"})
    schemes.emplace_back(x);
  uint32_t seed = 11;
  for (const auto& name : schemes)
    for (const int axis : {1, 0})
      for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
        BlockScaling s = parse_block_scaling(name);
        s.axis = axis;
        s.element_options.rounding = r;
        expect_packed_matches_reference(s, adversarial(s, 37, 100, seed), 37, 100);
        seed += 3;
      }
  // FP4 rows of odd length, some crossing 2^32 in their element indices (a piece then starts on
  // an odd column, inside a byte), NaN and Inf among them: codes packed in place.
  for (const char* name : {"mxfp4", "nvfp4", "e2m1", "mxfp8_e4m3"})
    for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
      BlockScaling s = parse_block_scaling(name);
      s.element_options.rounding = r;
      expect_packed_matches_reference(s, adversarial(s, 7, 1101, seed++), 7, 1101, (uint64_t{1} << 32) - 2999);
    }
  // Large enough for the threaded path.
  for (const char* name : {"mxfp4", "nvfp4", "fp8_e4m3:row"})
    for (const int axis : {1, 0}) {
      BlockScaling s = parse_block_scaling(name);
      s.axis = axis;
      expect_packed_matches_reference(s, adversarial(s, 130, 260, seed++), 130, 260);
    }
}

// Every code's value, -0, NaN, Inf and values between codes, for a format of at most 8 bits.
std::vector<float> every_value(const Format& f) {
  std::vector<float> x = {-0.0f, NAN, INFINITY, -INFINITY};
  for (uint64_t c = 0; c < (uint64_t{1} << f.bits()); ++c) {
    const float v = static_cast<float>(decode(f, c));
    x.push_back(v);
    x.push_back(std::nextafter(v, 0.0f));  // rounds to v or to its neighbour
    x.push_back(v * 1.0625f);              // between codes, or past the largest
  }
  return x;
}

TEST(BlockFused, PackedCodesOfEveryValueOfEveryByteFormatMatchScalar) {
  // Plain schemes: the element pass sees each value as it is, so every code's value reaches the
  // vectorised encoder.
  int formats = 0;
  for (const auto& preset : format_presets()) {
    if (preset.format.bits() > 8) continue;
    ++formats;
    const std::vector<float> x = every_value(preset.format);
    for (const Rounding r : {Rounding::kNearestEven, Rounding::kTowardZero, Rounding::kStochastic}) {
      BlockScaling s = parse_block_scaling(preset.format.name);
      s.element_options.rounding = r;
      expect_packed_matches_reference(s, x, 1, x.size());
    }
  }
  EXPECT_EQ(formats, 13);
}

TEST(BlockFused, MxPackedCodesOfEveryElementValueMatchScalarAndDecodeExactly) {
  // Blocks of 32 led by the largest element value: under floor the scale is 1, so the other 31
  // values (every code in turn) are encoded as they are and decode back exactly.
  for (const char* name : kMxElements) {
    const BlockScaling s = parse_block_scaling(name);
    const Format& f = s.element;
    const float unit = std::ldexp(1.0f, s.element_exp());  // MXINT8 counts in 2^-6
    std::vector<float> values;
    for (uint64_t c = 0; c < (uint64_t{1} << f.bits()); ++c)
      if (f.is_canonical(c) && std::isfinite(decode(f, c))) values.push_back(static_cast<float>(decode(f, c)) * unit);
    const size_t rows = (values.size() + 30) / 31;
    std::vector<float> x(rows * 32, 0.0f);
    for (size_t r = 0; r < rows; ++r) x[r * 32] = static_cast<float>(s.max_elem());  // in scaled units
    for (size_t i = 0; i < values.size(); ++i) x[(i / 31) * 32 + 1 + i % 31] = values[i];
    expect_packed_matches_reference(s, x, rows, 32);
    std::vector<float> back(x.size());
    block_dequantize(s, block_quantize(s, x, rows, 32), back);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits_of(back[i]), bits_of(x[i])) << name << " element " << i;
  }
}

TEST(BlockFused, FixedEncodeScaleEqualsTheScaleDerivedFromAmax) {
  // Delayed scaling hands a per-tensor scale in; with the scale the current-scaling rule derives
  // (max_elem / amax in FP32) it must give the reference's current-scaling bits.
  const BlockScaling s = parse_block_scaling("fp8_e4m3:tensor");
  std::vector<float> x(50000);
  std::mt19937 gen(2);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(gen) * 3.0f;
  std::vector<float> want(x.size()), got(x.size());
  BlockStats want_stats, got_stats;
  block_fake_quantize_reference(s, x, want, 1, x.size(), &want_stats);
  const float scale = 448.0f / static_cast<float>(finite_amax(x));
  fake_quantize_with_scale(s, scale, x, got, &got_stats);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  EXPECT_TRUE(same_stats(got_stats, want_stats)) << stats_text(got_stats) << "\n" << stats_text(want_stats);
}

}  // namespace
}  // namespace precsim

// The vectorised float32 quantize kernel gives the same bits and the same statistics as the scalar
// reference (quantize_reference, one encode() per element) on every Highway target compiled into
// the binary: a strided sweep over all 2^32 float32 patterns, every boundary of each format (each
// value, its neighbouring float32 patterns, the midpoints between values), specials and random
// data; every rounding mode, both overflow modes, flush on and off, several SR widths.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

const Rounding kModes[] = {Rounding::kNearestEven, Rounding::kNearestAway, Rounding::kTowardZero,
                           Rounding::kUp,          Rounding::kDown,        Rounding::kOdd,
                           Rounding::kStochastic};

// Every preset but fp64, and custom rows covering each option and the edge of float32's range.
std::vector<std::string> kernel_formats() {
  std::vector<std::string> names;
  for (const auto& p : format_presets())
    if (p.format.name != "fp64") names.push_back(p.format.name);
  for (const char* c : {"e3m2:nosub", "e4m3:nosub:fnuz", "e4m3:unsigned", "e5m0:nanonly",
                        "e1m2:finite", "e2m0:finite", "e5m2:unsigned:finite", "e6m9",
                        "e8m3:bias=130",      // smallest normal 2^-129, below float32's
                        "e8m5",               // largest value near FLT_MAX
                        "e3m4:bias=-90",      // only huge values: every small input underflows
                        "e8m23:nosub", "e7m16", "e8m3:nosub:bias=128", "e8m0:nanonly:unsigned:bias=140"})
    names.emplace_back(c);
  return names;
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

void push_both_signs(std::vector<float>& v, uint32_t b) {
  v.push_back(from_bits(b & 0x7fffffffu));
  v.push_back(from_bits(b | 0x80000000u));
}

// Float32 inputs at and around every value of f and every midpoint between neighbours, where
// each rounding mode changes its mind; and the neighbourhood of the overflow threshold.
std::vector<float> boundary_inputs(const Format& f) {
  std::vector<double> vals;
  const uint64_t mags = uint64_t{1} << (f.bits() - (f.is_signed ? 1 : 0));
  const uint64_t step = mags <= (uint64_t{1} << 16) ? 1 : mags >> 14;
  for (uint64_t c = 0; c < mags; c += step) vals.push_back(decode(f, c));
  for (uint64_t c = mags > 64 ? mags - 64 : 0; c < mags; ++c) vals.push_back(decode(f, c));
  for (uint64_t c = 0; c < std::min<uint64_t>(mags, 64); ++c) vals.push_back(decode(f, c));
  std::erase_if(vals, [](double v) { return !std::isfinite(v) || v < 0; });
  std::sort(vals.begin(), vals.end());
  vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
  if (vals.size() >= 2) vals.push_back(2 * vals.back() - vals[vals.size() - 2]);  // next past max
  std::vector<double> points = vals;
  for (size_t i = 0; i + 1 < vals.size(); ++i) points.push_back((vals[i] + vals[i + 1]) / 2);
  points.push_back(vals.front() / 2);
  std::vector<float> in;
  for (const double p : points) {
    const float x = static_cast<float>(p);
    if (!std::isfinite(x) || static_cast<double>(x) != p) continue;
    for (int delta = -1; delta <= 1; ++delta) push_both_signs(in, bits_of(x) + delta);
  }
  return in;
}

std::vector<float> special_inputs() {
  std::vector<float> in;
  for (const uint32_t b : {0x0u, 0x1u, 0x2u, 0x3u, 0x7fffffu, 0x400000u, 0x400001u, 0x3fffffu,
                           0x800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u,
                           0x7fffffffu, 0x7fa00000u, 0x3f800000u, 0x00000100u})
    push_both_signs(in, b);
  return in;
}

// Patterns i * stride for an odd stride: every exponent, sign and a spread of low bits.
std::vector<float> strided_sweep(uint32_t stride) {
  std::vector<float> in;
  uint32_t b = 0x9e3779b9u;
  for (uint64_t i = 0; i < (uint64_t{1} << 32) / stride; ++i, b += stride) in.push_back(from_bits(b));
  return in;
}

std::vector<float> random_inputs(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> expo(-150.0, 128.0);
  std::vector<float> in;
  for (size_t i = 0; i < n; ++i) in.push_back(normal(gen));
  for (size_t i = 0; i < n; ++i) in.push_back(static_cast<float>((i & 1 ? -1 : 1) * std::exp2(expo(gen))));
  for (size_t i = 0; i < n; ++i) in.push_back(from_bits(static_cast<uint32_t>(gen())));
  return in;
}

std::string describe(const Format& f, const QuantOptions& o) {
  return f.name + " " + std::string(to_string(o.rounding)) + " k=" + std::to_string(o.sr_bits) +
         " overflow=" + std::string(to_string(o.overflow)) + (o.flush_subnormals ? " flush" : "");
}

std::string stats_text(const QuantStats& s) {
  return "count=" + std::to_string(s.count) + " inexact=" + std::to_string(s.inexact) +
         " underflow=" + std::to_string(s.underflow_to_zero) + " subnormal=" + std::to_string(s.subnormal) +
         " overflow=" + std::to_string(s.overflow) + " saturated=" + std::to_string(s.saturated) +
         " nan=" + std::to_string(s.nan);
}

// Runs the kernel on every target against one scalar result; reports the first mismatches.
void expect_all_targets_match(const Format& f, const QuantOptions& o, const std::vector<float>& in,
                              uint64_t index_base = 12345) {
  std::vector<float> want(in.size());
  QuantStats want_stats;
  quantize_reference(f, in, want, o, &want_stats, index_base);
  for (const auto& target : quantize_simd_targets()) {
    force_quantize_simd_target(target);
    std::vector<float> got(in.size());
    QuantStats got_stats;
    quantize(f, in, got, o, &got_stats, index_base);
    force_quantize_simd_target("");
    int shown = 0;
    for (size_t i = 0; i < in.size() && shown < 5; ++i) {
      if (bits_of(got[i]) != bits_of(want[i])) {
        ADD_FAILURE() << target << " " << describe(f, o) << ": input " << std::hexfloat << in[i]
                      << std::hex << " (0x" << bits_of(in[i]) << ") index " << std::dec
                      << index_base + i << std::hex << ": kernel 0x" << bits_of(got[i])
                      << ", scalar 0x" << bits_of(want[i]);
        ++shown;
      }
    }
    EXPECT_EQ(got_stats, want_stats) << target << " " << describe(f, o) << "\n kernel " << stats_text(got_stats)
                                     << "\n scalar " << stats_text(want_stats);
    if (shown || got_stats != want_stats) return;  // one target's failure is enough to read
  }
}

std::vector<QuantOptions> all_options(const std::vector<int>& sr_widths = {32, 3}) {
  std::vector<QuantOptions> opts;
  for (const Rounding r : kModes)
    for (const Overflow ov : {Overflow::kIeee, Overflow::kSaturate})
      for (const bool flush : {false, true})
        for (const int k : r == Rounding::kStochastic ? sr_widths : std::vector<int>{32}) {
          QuantOptions o;
          o.rounding = r;
          o.overflow = ov;
          o.flush_subnormals = flush;
          o.sr_bits = k;
          o.sr_key = SrKey{0xfeedULL + static_cast<uint64_t>(k), 7, 3, 1};
          opts.push_back(o);
        }
  return opts;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class Kernel : public ::testing::TestWithParam<std::string> {};

TEST_P(Kernel, IsTakenForEveryFormatThatFitsFloat32) {
  EXPECT_TRUE(quantize_is_vectorised(format_by_name(GetParam())));
}

TEST_P(Kernel, BoundariesSpecialsAndRandomMatchScalarOnEveryTarget) {
  const Format f = format_by_name(GetParam());
  std::vector<float> in = boundary_inputs(f);
  const auto sp = special_inputs();
  in.insert(in.end(), sp.begin(), sp.end());
  const auto rnd = random_inputs(4096, 42);
  in.insert(in.end(), rnd.begin(), rnd.end());
  for (const auto& o : all_options()) expect_all_targets_match(f, o, in);
}

TEST_P(Kernel, StridedSweepOfAllFloat32PatternsMatchesScalar) {
  const Format f = format_by_name(GetParam());
  // Full sweeps (PRECSIM_FULL_SWEEP=1) use a stride of 257: 16.7M patterns per option set.
  const bool full = std::getenv("PRECSIM_FULL_SWEEP") && std::string(std::getenv("PRECSIM_FULL_SWEEP")) == "1";
  static const std::vector<float> in = strided_sweep(full ? 257 : 0x10001);
  for (const auto& o : all_options()) expect_all_targets_match(f, o, in);
}

TEST(KernelStochastic, EveryRandomBitWidthMatchesScalar) {
  for (const char* name : {"e4m3", "bf16", "e2m1", "fp16"}) {
    const Format f = format_by_name(name);
    std::vector<float> in = boundary_inputs(f);
    if (in.size() > 50000) in.resize(50000);
    const auto rnd = random_inputs(2048, 5);
    in.insert(in.end(), rnd.begin(), rnd.end());
    for (const auto& o : all_options({1, 2, 7, 11, 23, 24, 31})) {
      if (o.rounding == Rounding::kStochastic) expect_all_targets_match(f, o, in);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Kernel, ::testing::ValuesIn(kernel_formats()), test_name);

TEST(KernelDispatch, ListsTargetsAndForcesEach) {
  const auto targets = quantize_simd_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(quantize_simd_target(), targets.front());
  for (const auto& t : targets) {
    force_quantize_simd_target(t);
    EXPECT_EQ(quantize_simd_target(), t);
  }
  force_quantize_simd_target("");
  EXPECT_EQ(quantize_simd_target(), targets.front());
  EXPECT_THROW(force_quantize_simd_target("AVX9"), std::invalid_argument);
}

TEST(KernelDispatch, WideFormatsTakeTheScalarPath) {
  for (const char* name : {"fp64", "e8m24", "e9m2", "e11m10", "e8m7:bias=100", "e8m23:nosub:bias=130"})
    EXPECT_FALSE(quantize_is_vectorised(format_by_name(name))) << name;
}

TEST(KernelTails, EveryLengthAndOffsetMatchesScalar) {
  const auto rnd = random_inputs(40, 7);
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  for (const char* name : {"e4m3", "e8m0", "bf16"}) {
    const Format f = format_by_name(name);
    for (size_t n = 0; n <= 40; ++n) {
      const std::vector<float> in(rnd.begin() + 40, rnd.begin() + 40 + static_cast<long>(n));
      expect_all_targets_match(f, o, in, n * 1000);
    }
  }
}

TEST(KernelTails, StochasticIndicesCrossing2To32MatchScalar) {
  const auto in = random_inputs(3000, 9);
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  o.sr_bits = 16;
  for (const uint64_t base : {(uint64_t{1} << 32) - 4500, (uint64_t{5} << 32) - 7, uint64_t{0}})
    expect_all_targets_match(format_by_name("e5m2"), o, in, base);
}

TEST(KernelTails, InPlaceWithoutStatsAndOnAnyThreadCount) {
  const auto in = random_inputs(70000, 11);
  const Format f = format_by_name("fp16");
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  std::vector<float> want(in.size());
  QuantStats want_stats;
  quantize_reference(f, in, want, o, &want_stats, 0);
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> buf = in;
    quantize(f, buf, buf, o, nullptr, 0);
    EXPECT_EQ(0, std::memcmp(buf.data(), want.data(), buf.size() * sizeof(float))) << threads << " threads";
    QuantStats s;
    buf = in;
    quantize(f, buf, buf, o, &s, 0);
    EXPECT_EQ(s, want_stats) << threads << " threads";
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace precsim

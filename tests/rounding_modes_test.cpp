// Rounding modes: tables of special cases with values taken from the specs (IEEE 754, OCP MX and
// OFP8, the FP8 paper) and from other simulators' test vectors, and a randomized differential
// test of encode() against the exact oracle in reference_rounding.h for many formats.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "precsim/formats/rounding.h"
#include "precsim/formats/sr_bits.h"
#include "reference_rounding.h"

namespace precsim {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  const char* format;
  Rounding mode;
  Overflow overflow;
  double in;
  double want;         // NaN: a NaN code is expected
  bool want_negative;  // sign of the expected result (zeros and NaN included)
};

QuantOptions opts(Rounding r, Overflow ov = Overflow::kIeee) {
  QuantOptions o;
  o.rounding = r;
  o.overflow = ov;
  return o;
}

void check(const Case& c) {
  const Format f = format_by_name(c.format);
  const Rounded r = encode(f, c.in, opts(c.mode, c.overflow));
  const double got = decode(f, r.code);
  SCOPED_TRACE(::testing::Message() << c.format << " " << to_string(c.mode) << " " << to_string(c.overflow)
                                    << " in=" << std::hexfloat << c.in << " code=0x" << std::hex << r.code);
  if (std::isnan(c.want)) {
    EXPECT_TRUE(is_nan_code(f, r.code)) << got;
    if (f.has_negative_zero()) {
      EXPECT_EQ((r.code & f.sign_mask()) != 0, c.want_negative);
    }
  } else {
    EXPECT_EQ(got, c.want);
    if (f.has_negative_zero()) {
      EXPECT_EQ(std::signbit(got), c.want_negative);
    }
  }
}

constexpr auto RNE = Rounding::kNearestEven;
constexpr auto RNA = Rounding::kNearestAway;
constexpr auto RTZ = Rounding::kTowardZero;
constexpr auto UP = Rounding::kUp;
constexpr auto DOWN = Rounding::kDown;
constexpr auto ODD = Rounding::kOdd;
constexpr auto IEEE = Overflow::kIeee;
constexpr auto SAT = Overflow::kSaturate;

TEST(RoundingTable, Fp8Fp6Fp4Boundaries) {
  const Case cases[] = {
      // OFP8 E4M3FN: max 448 = S.1111.110; the overflow threshold 464 ties to the even 448.
      {"e4m3", RNE, IEEE, 448, 448, false},
      {"e4m3", RNE, IEEE, 464, 448, false},
      {"e4m3", RNE, IEEE, 464.01, kNan, false},
      {"e4m3", RNE, IEEE, 465, kNan, false},
      {"e4m3", RNE, IEEE, -465, kNan, true},  // the NaN keeps the sign: 0xff
      {"e4m3", RNE, IEEE, -kInf, kNan, true},
      {"e4m3", RNE, SAT, 464.01, 448, false},
      {"e4m3", RNE, SAT, -1e9, -448, true},
      {"e4m3", RNE, IEEE, kInf, kNan, false},
      {"e4m3", RNE, SAT, kInf, 448, false},
      {"e4m3", RNE, SAT, -kInf, -448, true},
      {"e4m3", RNA, IEEE, 464, kNan, false},  // a tie goes away: past the largest finite
      {"e4m3", UP, IEEE, 448.5, kNan, false},
      {"e4m3", RTZ, IEEE, 1000, 448, false},
      {"e4m3", ODD, IEEE, 450, 448, false},
      {"e4m3", DOWN, IEEE, -448.5, kNan, true},
      {"e4m3", UP, IEEE, -448.5, -448, true},
      // E4M3 subnormals: min 2^-9; half of it ties to the even zero.
      {"e4m3", RNE, IEEE, 0x1p-10, 0, false},
      {"e4m3", RNE, IEEE, -0x1p-10, -0.0, true},
      {"e4m3", RNE, IEEE, std::nextafter(0x1p-10, 1.0), 0x1p-9, false},
      {"e4m3", RNE, IEEE, 3 * 0x1p-10, 0x1p-8, false},  // 1.5 quanta ties to 2
      {"e4m3", RNA, IEEE, 0x1p-10, 0x1p-9, false},
      {"e4m3", UP, IEEE, 0x1p-60, 0x1p-9, false},
      {"e4m3", DOWN, IEEE, 0x1p-60, 0, false},
      {"e4m3", DOWN, IEEE, -0x1p-60, -0x1p-9, true},
      {"e4m3", ODD, IEEE, 0x1p-60, 0x1p-9, false},
      // E5M2: max 57344; threshold 61440 = 57344 + 4096.
      {"e5m2", RNE, IEEE, 57344, 57344, false},
      {"e5m2", RNE, IEEE, 61439.9, 57344, false},
      {"e5m2", RNE, IEEE, 61440, kInf, false},
      {"e5m2", RNE, SAT, 61440, 57344, false},
      {"e5m2", RNE, SAT, -kInf, -57344, true},
      {"e5m2", RNE, IEEE, -kInf, -kInf, true},
      {"e5m2", RTZ, IEEE, 1e6, 57344, false},
      {"e5m2", UP, IEEE, -1e6, -57344, true},
      // FP4 E2M1 {0, 0.5, 1, 1.5, 2, 3, 4, 6}: no Inf or NaN, so overflow saturates.
      {"e2m1", RNE, IEEE, 5, 4, false},
      {"e2m1", RNE, IEEE, 7, 6, false},
      {"e2m1", RNE, IEEE, 0.25, 0, false},
      {"e2m1", RNE, IEEE, 0.75, 1, false},
      {"e2m1", RNE, IEEE, 1e6, 6, false},
      {"e2m1", RNE, IEEE, 2.5, 2, false},
      {"e2m1", RNE, IEEE, 3.5, 4, false},
      {"e2m1", RNE, IEEE, kNan, 6, false},  // no NaN code: +max, as CUDA's __nv_cvt_float_to_fp4
      {"e2m1", RTZ, IEEE, 5.9, 4, false},
      {"e2m1", UP, IEEE, 4.1, 6, false},
      {"e2m1", ODD, IEEE, 2.5, 3, false},
      // FP6: E2M3 max 7.5, E3M2 max 28.
      {"e2m3", RNE, IEEE, 7.75, 7.5, false},
      {"e2m3", RNE, IEEE, 0.0625, 0, false},
      {"e3m2", RNE, IEEE, 30, 28, false},
      {"e3m2", RNE, IEEE, 0.09375, 0.125, false},
      // fnuz: no -0; the negative-zero code is NaN.
      {"e4m3fnuz", RNE, IEEE, -0x1p-12, 0, false},
      {"e4m3fnuz", RNE, IEEE, -0.0, 0, false},
      {"e4m3fnuz", RNE, IEEE, 247.9, 240, false},
      {"e4m3fnuz", RNE, IEEE, 248, kNan, false},  // max 240 has an odd significand: the tie overflows
      {"e4m3fnuz", RNE, SAT, 248, 240, false},
      {"e5m2fnuz", RNE, IEEE, kInf, kNan, false},
      // E8M0 (scales): powers of two, no zero; ties go up since the kept bit is the implicit 1.
      {"e8m0", RNE, IEEE, 1.5, 2, false},
      {"e8m0", RNE, IEEE, 3, 4, false},
      {"e8m0", RNE, IEEE, 0.75, 1, false},
      {"e8m0", RNE, IEEE, 2.9, 2, false},
      {"e8m0", RTZ, IEEE, 3.9, 2, false},
      {"e8m0", UP, IEEE, 2.1, 4, false},
      {"e8m0", RNE, IEEE, 0, 0x1p-127, false},
      {"e8m0", RNE, IEEE, -1, kNan, false},
      {"e8m0", RNE, IEEE, 0x1.8p127, kNan, false},
      {"e8m0", RNE, SAT, 0x1.8p127, 0x1p127, false},
      // int8: symmetric, -128 unused.
      {"int8", RNE, IEEE, 2.5, 2, false},
      {"int8", RNE, IEEE, 3.5, 4, false},
      {"int8", RNE, IEEE, -2.5, -2, false},
      {"int8", RNE, IEEE, 127.5, 127, false},
      {"int8", RNE, IEEE, -128, -127, false},
      {"int8", RNA, IEEE, -2.5, -3, false},
      {"int8", ODD, IEEE, 2.5, 3, false},
      {"int8", RNE, IEEE, -0.0, 0, false},
      {"int4", RNE, IEEE, 9, 7, false},
  };
  for (const Case& c : cases) check(c);
}

TEST(RoundingTable, KnownValuesOfPi) {
  const double pi = 3.14159265358979323846;
  EXPECT_EQ(round_to(format_by_name("fp16"), pi), 3.140625);
  EXPECT_EQ(round_to(format_by_name("bf16"), pi), 3.140625);
  EXPECT_EQ(round_to(format_by_name("e4m3"), pi), 3.25);
  EXPECT_EQ(round_to(format_by_name("e5m2"), pi), 3.0);
  EXPECT_EQ(round_to(format_by_name("e2m1"), pi), 3.0);
  EXPECT_EQ(round_to(format_by_name("tf32"), pi), 3.140625);
  EXPECT_EQ(round_to(format_by_name("fp32"), pi), double(float(pi)));
}

TEST(RoundingTable, Fp16EveryModeAtAMidpointAndOneUlpAround) {
  const double lo = 1.0, hi = 1.0 + 0x1p-10, mid = 1.0 + 0x1p-11;
  const double below = std::nextafter(mid, 0.0), above = std::nextafter(mid, 2.0);
  struct Row {
    Rounding r;
    double at_below, at_mid, at_above;
  };
  const Row rows[] = {{RNE, lo, lo, hi}, {RNA, lo, hi, hi}, {RTZ, lo, lo, lo},
                      {UP, hi, hi, hi},  {DOWN, lo, lo, lo}, {ODD, hi, hi, hi}};
  const Format f = format_by_name("fp16");
  for (const Row& row : rows) {
    SCOPED_TRACE(to_string(row.r));
    EXPECT_EQ(round_to(f, below, opts(row.r)), row.at_below);
    EXPECT_EQ(round_to(f, mid, opts(row.r)), row.at_mid);
    EXPECT_EQ(round_to(f, above, opts(row.r)), row.at_above);
    // Mirrored: up and down swap, the others are symmetric.
    const double want_neg_mid = row.r == UP ? -lo : row.r == DOWN ? -hi : -row.at_mid;
    EXPECT_EQ(round_to(f, -mid, opts(row.r)), want_neg_mid);
  }
  // The next pair up has the odd value below: ties to even now go up, round-to-odd goes down.
  const double mid2 = hi + 0x1p-11;
  EXPECT_EQ(round_to(f, mid2, opts(RNE)), 1.0 + 0x1p-9);
  EXPECT_EQ(round_to(f, mid2, opts(ODD)), hi);
  EXPECT_EQ(round_to(f, 1.00048828125), 1.0);
  EXPECT_EQ(round_to(f, 1.00146484375), 1.001953125);
}

TEST(RoundingTable, Fp16OverflowPerMode) {
  const Format f = format_by_name("fp16");
  // Threshold 65520 = 65504 + ulp/2: ties to even go to 65536, beyond the range.
  struct Row {
    Rounding r;
    double pos_small, pos_threshold, neg_threshold;  // 65505, 65520, -65520
  };
  const Row rows[] = {{RNE, 65504, kInf, -kInf},   {RNA, 65504, kInf, -kInf},
                      {RTZ, 65504, 65504, -65504}, {UP, kInf, kInf, -65504},
                      {DOWN, 65504, 65504, -kInf}, {ODD, 65504, 65504, -65504}};
  for (const Row& row : rows) {
    SCOPED_TRACE(to_string(row.r));
    uint32_t st = 0;
    EXPECT_EQ(round_to(f, 65505, opts(row.r), &st), row.pos_small);
    EXPECT_EQ(round_to(f, 65520, opts(row.r), &st), row.pos_threshold);
    // IEEE 754 overflow: the result rounded with an unbounded exponent exceeds the largest finite.
    EXPECT_EQ((st & kOverflow) != 0, std::isinf(row.pos_threshold)) << status_to_string(st);
    EXPECT_EQ(round_to(f, -65520, opts(row.r)), row.neg_threshold);
    EXPECT_EQ(round_to(f, 65519), 65504);
    EXPECT_EQ(round_to(f, 65520, opts(row.r, SAT)), 65504);
    EXPECT_EQ(round_to(f, -kInf, opts(row.r, SAT)), -65504);
  }
}

TEST(RoundingTable, StatusBits) {
  const Format f = format_by_name("fp16");
  uint32_t st = 0;
  round_to(f, 0x1p-24, {}, &st);
  EXPECT_EQ(st, uint32_t{kSubnormalResult});
  round_to(f, 0x1p-26, {}, &st);
  EXPECT_EQ(st, uint32_t{kInexact | kUnderflowToZero});
  round_to(f, 1e6, {}, &st);
  EXPECT_EQ(st, uint32_t{kInexact | kOverflow});
  round_to(f, 1e6, opts(RNE, SAT), &st);
  EXPECT_EQ(st, uint32_t{kInexact | kOverflow | kSaturated});
  round_to(f, kNan, {}, &st);
  EXPECT_EQ(st, uint32_t{kNanResult});
  round_to(format_by_name("e4m3"), 500, {}, &st);
  EXPECT_EQ(st, uint32_t{kInexact | kOverflow | kNanResult});
  round_to(format_by_name("e2m1"), kNan, {}, &st);
  EXPECT_EQ(st, uint32_t{kInvalid});
  round_to(format_by_name("e8m0"), -2, {}, &st);
  EXPECT_TRUE(st & kInvalid);
  // e8m0 has no zero: tiny values give 2^-127, inexact but not an underflow to zero.
  EXPECT_EQ(round_to(format_by_name("e8m0"), 1e-45, {}, &st), 0x1p-127);
  EXPECT_EQ(st, uint32_t{kInexact});
  round_to(format_by_name("e8m0"), 0.0, {}, &st);
  EXPECT_EQ(st, uint32_t{kInexact});
  QuantOptions flush;
  flush.flush_subnormals = true;
  EXPECT_EQ(round_to(f, std::nextafter(0x1p-14, 0.0), flush, &st), 0.0);
  EXPECT_EQ(st, uint32_t{kInexact | kUnderflowToZero});
}

// Round-to-odd into a format with two more mantissa bits and the same exponent range, then to
// nearest-even, equals nearest-even directly (Boldo & Melquiond 2008): a property of the mode.
TEST(RoundingTable, RoundToOddPreventsDoubleRounding) {
  const Format narrow = format_by_name("fp16"), wide = format_by_name("e5m12");
  const Format narrow_b = format_by_name("bf16"), wide_b = format_by_name("e8m9");
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-30, 17);
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1 : 1);
    bad += round_to(narrow, round_to(wide, x, opts(ODD))) != round_to(narrow, x);
    const double y = std::ldexp(x, ex(rng) * 4);
    bad += round_to(narrow_b, round_to(wide_b, y, opts(ODD))) != round_to(narrow_b, y);
  }
  EXPECT_EQ(bad, 0);
  // Double rounding through a nearest mode does go wrong: 1 + 2^-11 + 2^-30 via 16 mantissa bits.
  const double x = 1.0 + 0x1p-11 + 0x1p-30;
  EXPECT_EQ(round_to(narrow, x), 1.0 + 0x1p-10);
  EXPECT_EQ(round_to(narrow, round_to(format_by_name("e5m16"), x)), 1.0);
}

// --- randomized differential test against the exact oracle ---------------------------------

std::vector<std::string> differential_formats() {
  std::vector<std::string> names;
  for (const auto& p : format_presets())
    if (p.format.bits() <= 16) names.push_back(p.format.name);
  for (const char* c : {"e5m7", "e3m2:nosub", "e4m3:bias=8:fnuz", "e4m3:unsigned", "e5m0:nanonly",
                        "e2m0:finite", "e3m3:nosub:nanonly", "e6m9", "e1m2:finite", "e4m3:nosub:fnuz",
                        "e5m2:unsigned:finite", "e4m3:bias=2", "e6m3:bias=60"})
    names.push_back(c);
  return names;
}

// Inputs that stress rounding: lerps between neighbours at 1/4, 1/2, 3/4 and random fractions,
// one double-ulp either side of every midpoint, far below and far above the range.
std::vector<double> differential_inputs(const std::vector<reference::Value>& vals, std::mt19937_64& rng) {
  std::vector<double> xs;
  std::uniform_int_distribution<size_t> pick(0, vals.size() - 2);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const size_t pairs = std::min<size_t>(vals.size() - 1, 2000);
  for (size_t n = 0; n < pairs; ++n) {
    const size_t i = vals.size() - 1 <= 2000 ? n : pick(rng);
    const double a = vals[i].v, b = vals[i + 1].v, mid = a + (b - a) / 2;
    for (const double x : {a + (b - a) / 4, mid, a + 3 * (b - a) / 4, a + (b - a) * u(rng),
                           std::nextafter(mid, 0.0), std::nextafter(mid, b)})
      xs.push_back(x);
  }
  const double maxv = vals.back().v;
  const double top_gap = maxv - vals[vals.size() - 2].v;
  for (const double x : {maxv + top_gap / 4, maxv + top_gap / 2, std::nextafter(maxv + top_gap / 2, 0.0),
                         std::nextafter(maxv + top_gap / 2, 1e300), maxv + top_gap, maxv * 4, 1e300,
                         vals[1].v / 2, std::nextafter(vals[1].v / 2, 0.0), std::nextafter(vals[1].v / 2, 1.0),
                         vals[1].v / 1024, 4.9e-324, 0.0})
    xs.push_back(x);
  std::uniform_int_distribution<int> ex(std::ilogb(vals[1].v) - 8, std::ilogb(maxv) + 3);
  for (int n = 0; n < 2000; ++n) xs.push_back(std::ldexp(1.0 + u(rng), ex(rng)));
  const size_t positive = xs.size();
  for (size_t i = 0; i < positive; ++i) xs.push_back(-xs[i]);
  return xs;
}

class Differential : public ::testing::TestWithParam<std::string> {};

TEST_P(Differential, EncodeMatchesExactReferenceInEveryMode) {
  const Format f = format_by_name(GetParam());
  const auto vals = reference::positive_values(f);
  std::mt19937_64 rng(std::hash<std::string>{}(f.name));
  const std::vector<double> xs = differential_inputs(vals, rng);
  uint64_t failures = 0, checked = 0;
  for (const Overflow ov : {IEEE, SAT}) {
    for (const Rounding r : {RNE, RNA, RTZ, UP, DOWN, ODD, Rounding::kStochastic}) {
      for (const bool flush : {false, true}) {
        for (const int k : {32, 5, 1}) {
          if (k != 32 && r != Rounding::kStochastic) continue;
          QuantOptions o = opts(r, ov);
          o.flush_subnormals = flush;
          o.sr_bits = k;
          o.sr_key = {99, 1, 2, 3};
          for (size_t i = 0; i < xs.size(); ++i) {
            const Rounded got = encode(f, xs[i], o, i);
            const reference::Expected want = reference::round_reference(f, vals, xs[i], o, sr_bits(o.sr_key, i));
            const bool code_ok = got.code == want.code;
            const bool ovf_ok = ((got.status & kOverflow) != 0) == want.overflow;
            ++checked;
            if ((!code_ok || !ovf_ok) && ++failures <= 10) {
              ADD_FAILURE() << f.name << " x=" << std::hexfloat << xs[i] << std::defaultfloat << " ("
                            << xs[i] << ") " << to_string(r) << " k=" << k << " " << to_string(ov)
                            << (flush ? " flush" : "") << ": got 0x" << std::hex << got.code << " ["
                            << status_to_string(got.status) << "], want 0x" << want.code
                            << (want.overflow ? " [overflow]" : "");
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << checked;
}

INSTANTIATE_TEST_SUITE_P(Formats, Differential, ::testing::ValuesIn(differential_formats()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace precsim

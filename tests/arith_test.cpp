// In-format arithmetic on the wide formats: IEEE special cases as a table, the CPFloat grid of
// special values in every mode, randomized operands against the exact oracle (arith_reference.h),
// fp32/fp64 nearest-even against the hardware, double-rounding detectors, stochastic rounding and
// the value API; fp16/bf16 nearest-even against the host paths of cuda_fp16.h / cuda_bf16.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith_reference.h"
#include "precsim/formats/arith.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

using arith_ref::hex;
using arith_ref::kAllModes;
QuantOptions with(Rounding r, Overflow ov = Overflow::kIeee, bool flush = false) {
  return arith_ref::options(r, ov, flush);
}

// ---- Special cases, bit for bit (APFloat-style table) ----------------------------------------

struct Special {
  const char* format;
  char op;  // + - * / f(ma) s(qrt)
  double a, b, c;
  Rounding rounding;
  Overflow overflow;
  double want;  // compared with signbit for zeros; NaN matches NaN
  uint32_t status;
};

double run(const Special& s, uint32_t* status) {
  const Format f = format_by_name(s.format);
  const QuantOptions o = with(s.rounding, s.overflow);
  switch (s.op) {
    case '+': return add_in(f, s.a, s.b, o, status);
    case '-': return sub_in(f, s.a, s.b, o, status);
    case '*': return mul_in(f, s.a, s.b, o, status);
    case '/': return div_in(f, s.a, s.b, o, status);
    case 'f': return fma_in(f, s.a, s.b, s.c, o, status);
    case 's': return sqrt_in(f, s.a, o, status);
  }
  return 0;
}

TEST(Arith, SpecialCaseTable) {
  using R = Rounding;
  constexpr auto RNE = R::kNearestEven, RD = R::kDown, RU = R::kUp;
  constexpr auto IE = Overflow::kIeee, SAT = Overflow::kSaturate;
  const Special table[] = {
      // Ties and directed rounding at 1 + half an ulp.
      {"fp32", '+', 1, 0x1p-24, 0, RNE, IE, 1, kInexact},
      {"fp32", '+', 1, 0x1p-24, 0, RU, IE, 1 + 0x1p-23, kInexact},
      {"fp32", '+', 1 + 0x1p-23, 0x1p-24, 0, RNE, IE, 1 + 0x1p-22, kInexact},
      {"fp64", '+', 1, 0x1p-53, 0, R::kNearestAway, IE, 1 + 0x1p-52, kInexact},
      // Invalid operations and NaN propagation.
      {"fp32", '+', kInf, -kInf, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", '-', kInf, kInf, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", '*', 0, -kInf, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", '/', 0, -0.0, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", '/', kInf, -kInf, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", 's', -1, 0, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", 's', -kInf, 0, 0, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", 'f', kInf, 0, 1, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", 'f', kInf, 2, -kInf, RNE, IE, kNan, kInvalid | kNanResult},
      {"fp32", '+', kNan, 1, 0, RNE, IE, kNan, kNanResult},
      {"fp32", 'f', 0, kInf, kNan, RNE, IE, kNan, kNanResult},
      {"bf16", 's', kNan, 0, 0, RNE, IE, kNan, kNanResult},
      // Infinities.
      {"fp32", '+', kInf, 1, 0, RNE, IE, kInf, kOk},
      {"fp32", '*', -kInf, 2, 0, RNE, IE, -kInf, kOk},
      {"fp32", '/', 1, -kInf, 0, RNE, IE, -0.0, kOk},
      {"fp32", '/', -kInf, 2, 0, RNE, IE, -kInf, kOk},
      {"fp32", 's', kInf, 0, 0, RNE, IE, kInf, kOk},
      {"fp32", 'f', 2, 3, kInf, RNE, IE, kInf, kOk},
      {"fp16", '+', kInf, 1, 0, RNE, SAT, 65504, kSaturated},
      // Division by zero.
      {"fp32", '/', 1, 0, 0, RNE, IE, kInf, kDivByZero},
      {"fp32", '/', 1, -0.0, 0, RNE, IE, -kInf, kDivByZero},
      {"fp16", '/', -3, 0, 0, RNE, SAT, -65504, kDivByZero | kSaturated},
      {"e4m3", '/', 1, 0, 0, RNE, IE, kNan, kDivByZero | kNanResult},
      {"e4m3", '/', -1, 0, 0, RNE, SAT, -448, kDivByZero | kSaturated},
      {"e4m3fnuz", '/', 1, 0, 0, RNE, IE, kNan, kDivByZero | kNanResult},
      {"fp4", '/', 1, 0, 0, RNE, IE, 6, kDivByZero | kSaturated},
      {"fp4", '/', 0, 0, 0, RNE, IE, 6, kInvalid},  // no NaN: the largest value, flagged
      {"fp4", 's', -1, 0, 0, RNE, IE, 6, kInvalid},
      {"int8", '/', -5, 0, 0, RNE, IE, -127, kDivByZero | kSaturated},
      // Signed zeros.
      {"fp32", '+', 1.5, -1.5, 0, RNE, IE, 0.0, kOk},
      {"fp32", '+', 1.5, -1.5, 0, RD, IE, -0.0, kOk},
      {"fp32", '-', 1.5, 1.5, 0, RU, IE, 0.0, kOk},
      {"fp32", '+', -0.0, -0.0, 0, RNE, IE, -0.0, kOk},
      {"fp32", '+', 0.0, -0.0, 0, RNE, IE, 0.0, kOk},
      {"fp32", '+', 0.0, -0.0, 0, RD, IE, -0.0, kOk},
      {"fp32", '-', -0.0, 0.0, 0, RNE, IE, -0.0, kOk},
      {"fp32", '*', -0.0, 3, 0, RNE, IE, -0.0, kOk},
      {"fp32", '/', 0, -3, 0, RNE, IE, -0.0, kOk},
      {"fp32", 's', -0.0, 0, 0, RNE, IE, -0.0, kOk},
      {"fp32", 'f', 0, -1, 0, RNE, IE, 0.0, kOk},  // (-0) + (+0)
      {"fp32", 'f', -0.0, 1, -0.0, RNE, IE, -0.0, kOk},
      {"fp32", 'f', 2, 3, -6, RD, IE, -0.0, kOk},
      {"e4m3fnuz", '-', 1, 1, 0, RD, IE, 0.0, kOk},  // fnuz has no -0
      {"e4m3fnuz", '*', -1, 0, 0, RNE, IE, 0.0, kOk},
      // Overflow and underflow.
      {"fp16", '+', 65504, 8, 0, RNE, IE, 65504, kInexact},
      {"fp16", '+', 65504, 16, 0, RNE, IE, kInf, kInexact | kOverflow},
      {"fp16", '+', 65504, 16, 0, R::kTowardZero, IE, 65504, kInexact},  // 65504 unbounded too
      {"fp16", '+', 65504, 32, 0, R::kTowardZero, IE, 65504, kInexact | kOverflow | kSaturated},
      {"fp16", '*', -256, 256, 0, RU, IE, -65504, kInexact | kOverflow | kSaturated},
      {"e4m3", '*', -32, 16, 0, RNE, IE, kNan, kInexact | kOverflow | kNanResult},
      {"e4m3", '+', 448, 16, 0, RNE, IE, 448, kInexact},
      {"e4m3", '+', 448, 32, 0, RNE, SAT, 448, kInexact | kOverflow | kSaturated},
      {"fp32", '*', 0x1p-100, 0x1p-30, 0, RNE, IE, 0x1p-130, kSubnormalResult},
      {"fp32", '*', 0x1p-100, 0x1p-60, 0, RNE, IE, 0.0, kInexact | kUnderflowToZero},
      {"fp32", '*', -0x1p-100, 0x1p-60, 0, RD, IE, -0x1p-149, kInexact | kSubnormalResult},
      // Integers: saturating, rounded division.
      {"int8", '+', 100, 100, 0, RNE, IE, 127, kInexact | kOverflow | kSaturated},
      {"int8", '/', 7, 2, 0, RNE, IE, 4, kInexact},
      {"int8", '/', 5, 2, 0, RNE, IE, 2, kInexact},
      {"int8", '/', -7, 2, 0, R::kTowardZero, IE, -3, kInexact},
      {"int8", 's', 2, 0, 0, RNE, IE, 1, kInexact},
      {"int8", 'f', 11, 11, 7, RNE, IE, 127, kInexact | kOverflow | kSaturated},
      {"int8", 'f', 11, 11, -6, RNE, IE, 115, kOk},
  };
  for (const Special& s : table) {
    uint32_t status = 0;
    const double got = run(s, &status);
    const std::string what = std::string(s.format) + " " + s.op + " " + std::to_string(s.a) + ", " +
                             std::to_string(s.b) + ", " + std::to_string(s.c) + " " +
                             std::string(to_string(s.rounding));
    if (std::isnan(s.want)) {
      EXPECT_TRUE(std::isnan(got)) << what << " gave " << got;
    } else {
      EXPECT_EQ(got, s.want) << what;
      EXPECT_EQ(std::signbit(got), std::signbit(s.want)) << what << " (sign of zero)";
    }
    EXPECT_EQ(status_to_string(status), status_to_string(s.status)) << what;
  }
}

TEST(Arith, FlushSubnormalsReadsInputsAsZeroAndFlushesResults) {
  const Format f = format_by_name("fp32");
  const QuantOptions ftz = with(Rounding::kNearestEven, Overflow::kIeee, true);
  uint32_t st = 0;
  EXPECT_EQ(add_in(f, 0x1p-149, 0x1p-126, ftz, &st), 0x1p-126);  // DAZ: the subnormal is 0
  EXPECT_EQ(st, kOk);
  EXPECT_EQ(add_in(f, 0x1p-149, 0x1p-126, with(Rounding::kNearestEven), &st), 0x1p-126 + 0x1p-149);
  EXPECT_EQ(mul_in(f, -0x1p-100, 0x1p-30, ftz, &st), 0.0);
  EXPECT_TRUE(std::signbit(mul_in(f, -0x1p-100, 0x1p-30, ftz)));
  EXPECT_EQ(st, kInexact | kUnderflowToZero);
  EXPECT_EQ(mul_in(f, 0x1p-149, 0x1p100, ftz, &st), 0.0);  // subnormal operand read as +0
  EXPECT_EQ(st, kOk);
}

TEST(Arith, ValueApiRejectsValuesOutsideTheFormat) {
  const Format fp32 = format_by_name("fp32");
  EXPECT_THROW(add_in(fp32, 0.1, 1.0), std::invalid_argument);
  EXPECT_THROW(add_in(format_by_name("fp4"), kNan, 1.0), std::invalid_argument);
  EXPECT_THROW(add_in(format_by_name("e4m3"), kInf, 1.0), std::invalid_argument);
  EXPECT_THROW(add_in(format_by_name("e4m3"), 512, 1.0), std::invalid_argument);
  EXPECT_THROW(mul_in(format_by_name("int8"), 2.5, 1.0), std::invalid_argument);
  EXPECT_THROW(mul_in(format_by_name("e8m0"), -1.0, 1.0), std::invalid_argument);
  try {
    add_in(format_by_name("bf16"), 1.0 / 3, 1.0);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0.33333"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mul_in(format_by_name("e8m0"), 0x1p-3, 0x1p5), 4.0);
}

// The value API accepts exactly the values of the format: every decoded code, and nothing between
// or beyond them.
TEST(Arith, ValueApiAcceptsExactlyTheFormatsValues) {
  for (const char* name : {"float8_e4m3fn", "float8_e5m2fnuz", "float8_e3m4", "fp4",
                           "float6_e3m2fn", "e8m0", "int8", "e4m3:nosub", "e5m2:unsigned"}) {
    const Format f = format_by_name(name);
    std::vector<double> values;
    for (uint64_t c = 0; c <= f.code_mask(); ++c) {
      const double v = decode(f, c);
      if (!std::isnan(v) && f.is_canonical(c)) values.push_back(v);
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    auto accepted = [&](double x) {
      try {
        const uint64_t c = code_of(f, x);
        EXPECT_TRUE(decode(f, c) == x || (std::isnan(x) && std::isnan(decode(f, c)))) << name << " " << x;
        add_in(f, x, x);  // must not throw either
        return true;
      } catch (const std::invalid_argument&) {
        EXPECT_THROW(add_in(f, x, x), std::invalid_argument) << name << " " << x;
        return false;
      }
    };
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isinf(values[i])) continue;
      EXPECT_TRUE(accepted(values[i])) << name << " " << values[i];
      if (i + 1 < values.size() && !std::isinf(values[i + 1])) {
        EXPECT_FALSE(accepted((values[i] + values[i + 1]) / 2)) << name << " midpoint " << values[i];
      }
    }
    const double big = std::isinf(values.back()) ? values[values.size() - 2] : values.back();
    EXPECT_FALSE(accepted(big * 2)) << name;
    EXPECT_EQ(accepted(kNan), f.has_nan()) << name;
    EXPECT_EQ(accepted(kInf), f.has_inf()) << name;
    EXPECT_EQ(accepted(-1.0), f.is_signed) << name;
    EXPECT_EQ(accepted(0.0), f.has_zero) << name;
  }
  // fp32: every float is accepted, the doubles next to it are not.
  const Format fp32 = format_by_name("fp32");
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::bit_cast<float>(uint32_t(rng()));
    if (!std::isfinite(x) || x == 0) continue;
    EXPECT_EQ(add_in(fp32, x, 0.0), x);
    EXPECT_THROW(add_in(fp32, std::nextafter(double(x), 0.0), 0.0), std::invalid_argument) << x;
  }
}

// ---- Double rounding -------------------------------------------------------------------------

// The exact result is a tie plus a bit far below it: rounding to a wider intermediate first
// would land on the tie and round to even, i.e. down. Correct rounding goes up.
TEST(Arith, NoDoubleRounding) {
  const Format fp64 = format_by_name("fp64"), fp32 = format_by_name("fp32"),
               bf16 = format_by_name("bf16"), e4m3 = format_by_name("e4m3");
  // fp64: 1 + 2^-53 + 2^-105 needs 106 bits.
  EXPECT_EQ(add_in(fp64, 1.0, 0x1p-53 + 0x1p-105), 1 + 0x1p-52);
  EXPECT_EQ(fma_in(fp64, 1 + 0x1p-52, 0x1p-53, 1.0), 1 + 0x1p-52);
  EXPECT_EQ(fma_in(fp64, 1 + 0x1p-52, -0x1p-53, -1.0), -1 - 0x1p-52);
  EXPECT_EQ(fma_in(fp64, 1 + 0x1p-52, 0x1p-54, 1.0), 1.0);  // below the tie
  // A tiny addend 1000 binades below still breaks the tie.
  EXPECT_EQ(fma_in(fp64, 1 + 0x1p-52, 1 + 0x1p-52, 0x1p-1000 * 0x1p-50),
            std::fma(1 + 0x1p-52, 1 + 0x1p-52, 0x1p-1050));
  EXPECT_EQ(fma_in(fp64, 1.0, 1.0 + 0x1p-52, 0x1p-53 * (1 + 0x1p-52) * 0x1p-60), 1.0 + 0x1p-52);
  EXPECT_EQ(sub_in(fp64, 1.0, 0x1p-54 + 0x1p-106), 1.0 - 0x1p-53);
  // fp32 and bf16: the tie at 2^-24 (2^-8) plus 2^-47 (2^-15).
  EXPECT_EQ(fma_in(fp32, 1 + 0x1p-23, 0x1p-24, 1.0), 1 + 0x1p-23);
  EXPECT_EQ(add_in(bf16, 1.0, 0x1p-8 + 0x1p-15), 1 + 0x1p-7);
  EXPECT_EQ(add_in(e4m3, 1.0, 0x1p-4 + 0x1p-7), 1.125);
  EXPECT_EQ(fma_in(fp32, 1.0, 0x1p-24 * (1 + 0x1p-23), 1.0), 1 + 0x1p-23);
}

// ---- Stochastic rounding and sequential accumulation ----------------------------------------

TEST(Arith, SequentialBf16AccumulationStagnatesUnlessStochastic) {
  const Format bf16 = format_by_name("bf16");
  double acc = 0;
  for (int i = 0; i < 1000; ++i) acc = add_in(bf16, acc, 1.0);
  EXPECT_EQ(acc, 256.0);  // 256 + 1 is a tie that rounds to even: the sum stops
  QuantOptions sr = with(Rounding::kStochastic);
  double mean = 0;
  for (uint64_t run = 0; run < 64; ++run) {
    sr.sr_key.step = run;
    double s = 0;
    for (int i = 0; i < 1000; ++i) s = add_in(bf16, s, 1.0, sr, nullptr, uint64_t(i));
    mean += s / 64;
  }
  EXPECT_NEAR(mean, 1000.0, 15.0);  // unbiased: each step is exact in expectation
}

TEST(Arith, StochasticRoundingIsUnbiasedAndReproducible) {
  const Format bf16 = format_by_name("bf16");
  const QuantOptions sr = with(Rounding::kStochastic);
  const double a = 1.0, b = 0x1p-9 * 3;  // 1 + 0.75 ulp: up with probability 3/4
  double sum = 0;
  const int n = 1 << 14;
  for (int i = 0; i < n; ++i) sum += add_in(bf16, a, b, sr, nullptr, uint64_t(i));
  const double ulp = 0x1p-7;
  EXPECT_NEAR(sum / n, a + b, 4 * ulp * std::sqrt(0.75 * 0.25 / n));
  for (uint64_t i : {0ull, 1ull, 77ull, 1ull << 40}) {
    EXPECT_EQ(add_in(bf16, a, b, sr, nullptr, i), add_in(bf16, a, b, sr, nullptr, i));
  }
}

// ---- Against the exact oracle -----------------------------------------------------------------

class OracleCheck {
 public:
  OracleCheck(const Format& f, const QuantOptions& o) : f_(f), o_(o), g_(f_) {}
  uint32_t bits(uint64_t index) const {
    return o_.rounding == Rounding::kStochastic ? sr_bits(o_.sr_key, index) : 0;
  }
  void expect(const char* op, const Rounded& got, const arith_ref::Result& want,
              std::initializer_list<uint64_t> args) {
    if (got.code == want.code && got.status == want.status) return;
    if (++failures_ > 5) return;
    std::string a;
    for (uint64_t x : args) a += (a.empty() ? "" : ", ") + hex(x);
    ADD_FAILURE() << f_.name << " " << to_string(o_.rounding) << " " << op << "(" << a << "): got "
                  << hex(got.code) << " [" << status_to_string(got.status) << "], want "
                  << hex(want.code) << " [" << status_to_string(want.status) << "]";
  }
  void all_ops(uint64_t a, uint64_t b, uint64_t c, uint64_t index) {
    expect("add", add_codes(f_, a, b, o_, index), arith_ref::add(g_, a, b, o_, bits(index)), {a, b});
    expect("sub", sub_codes(f_, a, b, o_, index), arith_ref::sub(g_, a, b, o_, bits(index)), {a, b});
    expect("mul", mul_codes(f_, a, b, o_, index), arith_ref::mul(g_, a, b, o_, bits(index)), {a, b});
    expect("div", div_codes(f_, a, b, o_, index), arith_ref::div(g_, a, b, o_, bits(index)), {a, b});
    expect("sqrt", sqrt_code(f_, a, o_, index), arith_ref::sqrt(g_, a, o_, bits(index)), {a});
    expect("fma", fma_codes(f_, a, b, c, o_, index), arith_ref::fma(g_, a, b, c, o_, bits(index)),
           {a, b, c});
  }
  int failures() const { return failures_; }

 private:
  Format f_;
  QuantOptions o_;
  arith_ref::Grid g_;
  int failures_ = 0;
};

const char* const kWideFormats[] = {"fp16", "bf16", "tf32", "fp32", "fp64"};
// Custom rows: no subnormals, NaN-only and fnuz encodings at 16 to 64 bits.
const char* const kCustomFormats[] = {"e8m23:nosub", "e11m52:nosub", "e5m10:nanonly", "e6m9:fnuz",
                                      "e10m40:bias=700"};

// CPFloat's test values: NaN, +-Inf, +-2, +-1, +-xmin, +-xmins, 0, -0, sqrt2, log2e, e, pi (the
// irrational ones rounded to nearest), every pair and every triple, in every mode.
TEST(ArithOracle, CpfloatGridEveryMode) {
  const double values[] = {kNan, kInf, -kInf, 2, -2, 1, -1, 0, -0.0, std::numbers::sqrt2,
                           std::numbers::log2e, std::numbers::e, std::numbers::pi};
  for (const char* name : kWideFormats) {
    const Format f = format_by_name(name);
    std::vector<uint64_t> codes;
    for (double v : values) codes.push_back(encode(f, v).code);
    for (double v : {f.min_normal(), f.min_subnormal()}) {
      codes.push_back(encode(f, v).code);
      codes.push_back(encode(f, -v).code);
    }
    for (Rounding r : kAllModes) {
      OracleCheck check(f, with(r));
      uint64_t index = 0;
      for (uint64_t a : codes)
        for (uint64_t b : codes)
          for (uint64_t c : codes) check.all_ops(a, b, c, index++);
      EXPECT_EQ(check.failures(), 0) << name << " " << to_string(r);
    }
  }
}

// Random operands: uniform codes, operands of nearby exponents (cancellation), addends near
// -a*b for fma (cancellation after an exact product), and subnormals.
class OperandSource {
 public:
  OperandSource(const Format& f, uint64_t seed) : f_(f), rng_(seed) {}
  uint64_t any() { return rng_() & f_.code_mask(); }
  uint64_t near(uint64_t a) {  // same or adjacent binade, random low bits, random sign
    const uint64_t low = (uint64_t{1} << f_.man_bits) - 1;
    const int shift = int(rng_() % 5) - 2;
    uint64_t mag = a & ~f_.sign_mask() & f_.code_mask();
    const int64_t field = int64_t(mag >> f_.man_bits) + shift;
    const int64_t top = int64_t((uint64_t{1} << f_.exp_bits) - 2);
    mag = (uint64_t(std::clamp<int64_t>(field, 0, top)) << f_.man_bits) | (rng_() & low);
    return mag | ((rng_() & 1) ? f_.sign_mask() : 0);
  }
  uint64_t subnormal() { return (rng_() & ((uint64_t{1} << f_.man_bits) - 1)) | (rng_() & 1 ? f_.sign_mask() : 0); }
  // About -a*b, with its last bits randomised.
  uint64_t cancel(uint64_t a, uint64_t b) {
    const double p = decode(f_, a) * decode(f_, b);
    const uint64_t c = encode(f_, -p).code;
    if (std::isnan(decode(f_, c)) || std::isinf(decode(f_, c))) return any();
    return c ^ (rng_() & 0xff);
  }
  uint64_t pick(int kind, uint64_t a) {
    switch (kind) {
      case 0: return any();
      case 1: return near(a);
      default: return subnormal();
    }
  }
  uint64_t next() { return rng_(); }

 private:
  const Format& f_;
  std::mt19937_64 rng_;
};

TEST(ArithOracle, RandomOperandsEveryMode) {
  const int n = 600;
  for (const char* name : kWideFormats) {
    const Format f = format_by_name(name);
    for (Rounding r : kAllModes) {
      OracleCheck check(f, with(r));
      OperandSource src(f, 0x5eed + uint64_t(r));
      for (int i = 0; i < n; ++i) {
        const uint64_t a = (i % 7 == 6) ? src.subnormal() : src.any();
        const uint64_t b = src.pick(int(src.next() % 3), a);
        const uint64_t c = (i % 2) ? src.cancel(a, b) : src.pick(int(src.next() % 3), a);
        check.all_ops(a, b, c, uint64_t(i));
      }
      EXPECT_EQ(check.failures(), 0) << name << " " << to_string(r);
    }
  }
}

TEST(ArithOracle, CustomFormatsRandomOperands) {
  for (const char* name : kCustomFormats) {
    const Format f = format_by_name(name);
    for (Rounding r : {Rounding::kNearestEven, Rounding::kUp, Rounding::kOdd, Rounding::kStochastic}) {
      OracleCheck check(f, with(r));
      OperandSource src(f, 0xc0de + uint64_t(r));
      for (int i = 0; i < 400; ++i) {
        const uint64_t a = (i % 7 == 6) ? src.subnormal() : src.any();
        const uint64_t b = src.pick(int(src.next() % 3), a);
        const uint64_t c = (i % 2) ? src.cancel(a, b) : src.pick(int(src.next() % 3), a);
        check.all_ops(a, b, c, uint64_t(i));
      }
      EXPECT_EQ(check.failures(), 0) << name << " " << to_string(r);
    }
  }
}

TEST(ArithOracle, FewBitStochasticSaturateAndFlush) {
  for (const char* name : {"fp16", "bf16", "fp32"}) {
    const Format f = format_by_name(name);
    QuantOptions sr3 = with(Rounding::kStochastic);
    sr3.sr_bits = 3;
    for (const QuantOptions& o : {sr3, with(Rounding::kNearestEven, Overflow::kSaturate, true),
                                  with(Rounding::kUp, Overflow::kSaturate, true)}) {
      OracleCheck check(f, o);
      OperandSource src(f, 77);
      for (int i = 0; i < 400; ++i) {
        const uint64_t a = (i % 3 == 0) ? src.subnormal() : src.any();
        const uint64_t b = src.pick(int(src.next() % 3), a);
        check.all_ops(a, b, src.cancel(a, b), uint64_t(i));
      }
      EXPECT_EQ(check.failures(), 0) << name;
    }
  }
}

// ---- Against the hardware (fp32/fp64, nearest-even; built with -ffp-contract=off) ------------

// T is float or double, Bits its integer twin; every op on random codes, bit for bit (NaN: any).
template <typename T, typename Bits>
void expect_hardware(const char* name, uint64_t seed) {
  const Format f = format_by_name(name);
  OperandSource src(f, seed);
  int failures = 0;
  auto same = [&](const char* op, T hw, const Rounded& r) {
    const double got = decode(f, r.code);
    if (std::isnan(hw) ? std::isnan(got) : std::bit_cast<Bits>(static_cast<T>(got)) == std::bit_cast<Bits>(hw)) return;
    if (++failures <= 5) ADD_FAILURE() << name << " " << op << ": hardware " << std::hexfloat << hw << ", got " << got;
  };
  for (int i = 0; i < 200000; ++i) {
    const uint64_t a = (i % 5 == 0) ? src.subnormal() : src.any();
    const uint64_t b = src.pick(int(src.next() % 3), a);
    const uint64_t c = (i % 2) ? src.cancel(a, b) : src.any();
    const T x = std::bit_cast<T>(Bits(a)), y = std::bit_cast<T>(Bits(b)), z = std::bit_cast<T>(Bits(c));
    same("add", x + y, add_codes(f, a, b));
    same("sub", x - y, sub_codes(f, a, b));
    same("mul", x * y, mul_codes(f, a, b));
    same("div", x / y, div_codes(f, a, b));
    same("sqrt", std::sqrt(x), sqrt_code(f, a));
    same("fma", std::fma(x, y, z), fma_codes(f, a, b, c));
  }
  EXPECT_EQ(failures, 0);
}

TEST(ArithHardware, Fp32MatchesFloat) { expect_hardware<float, uint32_t>("fp32", 32); }
TEST(ArithHardware, Fp64MatchesDouble) { expect_hardware<double, uint64_t>("fp64", 64); }

// ---- Against CUDA's host arithmetic (fp16, bf16; nearest-even) ------------------------------
// The host paths of __hadd/__hsub/__hmul/__hdiv compute in float and round once to the 16-bit
// format; float has at least 2p + 2 bits for both, so that double rounding is innocuous (Figueroa
// 1995) and they are a second, independent correctly-rounded implementation. NaN payloads differ
// (CUDA writes 0x7fff), so NaN results compare by NaN-ness.
template <typename H>
void expect_cuda_host(const char* name, uint64_t seed) {
  const Format f = format_by_name(name);
  OperandSource src(f, seed);
  int failures = 0;
  auto same = [&](const char* op, H hw, const Rounded& r, uint64_t a, uint64_t b) {
    const uint16_t bits = std::bit_cast<uint16_t>(hw);
    if (bits == r.code || (is_nan_code(f, bits) && is_nan_code(f, r.code))) return;
    if (++failures <= 5)
      ADD_FAILURE() << name << " " << op << "(" << hex(a) << ", " << hex(b) << "): CUDA " << hex(bits)
                    << ", got " << hex(r.code);
  };
  for (int i = 0; i < (1 << 18); ++i) {
    const uint64_t a = (i % 5 == 0) ? src.subnormal() : src.any();
    const uint64_t b = src.pick(int(src.next() % 3), a);
    const H x = std::bit_cast<H>(uint16_t(a)), y = std::bit_cast<H>(uint16_t(b));
    same("add", __hadd(x, y), add_codes(f, a, b), a, b);
    same("sub", __hsub(x, y), sub_codes(f, a, b), a, b);
    same("mul", __hmul(x, y), mul_codes(f, a, b), a, b);
    same("div", __hdiv(x, y), div_codes(f, a, b), a, b);
  }
  EXPECT_EQ(failures, 0);
}

TEST(ArithCudaHost, Fp16MatchesCudaFp16) { expect_cuda_host<__half>("fp16", 16); }
TEST(ArithCudaHost, Bf16MatchesCudaBf16) { expect_cuda_host<__nv_bfloat16>("bf16", 17); }

}  // namespace
}  // namespace precsim

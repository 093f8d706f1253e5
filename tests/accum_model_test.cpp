// Accumulation models against independent references: plain float loops (compiled without
// contraction), std::fma loops, and an exact integer oracle (Boost cpp_int) for correct rounding.
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/accum/accum_model_json.h"

namespace precsim {
namespace {

using boost::multiprecision::cpp_int;

const Format kFp32 = format_by_name("fp32");
const Format kBf16 = format_by_name("bf16");
const Format kFp16 = format_by_name("fp16");

std::vector<float> normal_in(const Format& f, size_t n, uint64_t seed, uint64_t stream, double sd = 1) {
  std::vector<float> v(n);
  fill_normal(v, seed, stream, 0, sd);
  quantize(f, v, v);
  return v;
}

// x * 2^kShift as an exact integer (x a float or a double of modest exponent).
constexpr int kShift = 1200;
cpp_int scaled(double x) {
  if (x == 0) return 0;
  int e;
  const double fr = std::frexp(std::fabs(x), &e);
  cpp_int m = static_cast<int64_t>(std::ldexp(fr, 53));
  const int sh = e - 53 + kShift;
  m = sh >= 0 ? cpp_int(m << sh) : cpp_int(m >> -sh);
  return x < 0 ? cpp_int(-m) : m;
}

// Whether r is the nearest-even float to the exact value X (scaled by 2^kShift).
::testing::AssertionResult is_rne_float(const cpp_int& X, float r) {
  const cpp_int R = scaled(r);
  const float up = std::nextafter(r, INFINITY), down = std::nextafter(r, -INFINITY);
  const cpp_int du = scaled(up) - R, dd = R - scaled(down);
  const cpp_int diff = X - R;
  // Nearest: within half the gap on each side; ties go to the even code.
  if (diff > 0 && 2 * diff > du) return ::testing::AssertionFailure() << r << " is below the nearest float";
  if (diff < 0 && -2 * diff > dd) return ::testing::AssertionFailure() << r << " is above the nearest float";
  uint32_t bits;
  std::memcpy(&bits, &r, 4);
  if ((diff > 0 && 2 * diff == du) || (diff < 0 && -2 * diff == dd)) {
    if (bits & 1) return ::testing::AssertionFailure() << r << " is a tie rounded to odd";
  }
  return ::testing::AssertionSuccess();
}

TEST(AccumPresets, AllParseRoundTripAndCarryTheirSource) {
  const std::vector<std::string> required = {"v100", "t4", "a100", "ada", "h100", "h100-tf32", "h100-fp8-fast",
                                             "h100-fp8-promote", "b200", "fp32-seq", "fp32-fma", "pairwise",
                                             "kahan", "exact", "unordered"};
  for (const auto& name : required) {
    SCOPED_TRACE(name);
    const AccumModel m = parse_accum_model(name);
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.calibrated);
    EXPECT_FALSE(m.source.empty());
    EXPECT_EQ(m.reproducible(), name != "unordered");
    const AccumModel back = accum_model_from_json(to_json(m));
    EXPECT_EQ(back, m);
    AccumModel from_spec = parse_accum_model(to_spec(m));
    from_spec.name = m.name;
    from_spec.source = m.source;
    from_spec.description = m.description;
    EXPECT_EQ(from_spec, m);
    const AccumModel from_text = parse_accum_model(to_json(m).dump());
    EXPECT_EQ(from_text, m);
  }
}

TEST(AccumPresets, ParametersFollowTheReferenceTable) {
  const AccumModel h = parse_accum_model("h100");
  EXPECT_EQ(h.kind, AccumKind::kBlockFma);
  EXPECT_EQ(h.block.block_size, 16);
  EXPECT_EQ(h.block.frac_bits, 25);
  EXPECT_EQ(h.block.final_rounding, Rounding::kTowardZero);
  const AccumModel f8 = parse_accum_model("h100-fp8-fast");
  EXPECT_EQ(f8.block.block_size, 32);
  EXPECT_EQ(f8.block.frac_bits, 13);
  EXPECT_EQ(f8.block.out_frac_bits, 13);
  EXPECT_EQ(f8.promote_every, 0);
  EXPECT_EQ(parse_accum_model("h100-fp8-promote").promote_every, 128);
  EXPECT_EQ(parse_accum_model("v100").block.block_size, 4);
  EXPECT_EQ(parse_accum_model("v100").block.frac_bits, 23);
  EXPECT_EQ(parse_accum_model("a100").block.block_size, 8);
  EXPECT_EQ(parse_accum_model("a100").block.frac_bits, 24);
  EXPECT_EQ(parse_accum_model("b200").block.frac_bits, 25);
}

TEST(AccumSpec, CustomSpecsAndChangedPresets) {
  const AccumModel m = parse_accum_model("block:n=32:F=13:ofb=13:promote=128");
  EXPECT_EQ(m.kind, AccumKind::kBlockFma);
  EXPECT_EQ(m.block.block_size, 32);
  EXPECT_EQ(m.promote_every, 128);
  const AccumModel s = parse_accum_model("seq:acc=bf16:round=toward-zero");
  EXPECT_EQ(s.acc, kBf16);
  EXPECT_EQ(s.rounding, Rounding::kTowardZero);
  const AccumModel p = parse_accum_model("h100:F=30");
  EXPECT_EQ(p.block.frac_bits, 30);
  EXPECT_EQ(p.block.block_size, 16);
  const AccumModel h16 = parse_accum_model("block:acc=fp16:final=nearest-even");
  EXPECT_EQ(h16.block.out_frac_bits, 10);
}

TEST(AccumSpec, BadSpecsNameTheProblem) {
  auto message = [](const std::string& spec) {
    try {
      parse_accum_model(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("h200x").find("h100-fp8-fast"), std::string::npos);  // lists the presets
  EXPECT_NE(message("h200x").find("'h200x'"), std::string::npos);
  EXPECT_NE(message("block:n=abc").find("n=abc"), std::string::npos);
  EXPECT_NE(message("block:zz=1").find("unknown key 'zz'"), std::string::npos);
  EXPECT_NE(message("block:n").find("not key=value"), std::string::npos);
  EXPECT_NE(message("block:F=99").find("F=99"), std::string::npos);
  EXPECT_NE(message("seq:acc=e9z").find("e9z"), std::string::npos);
  EXPECT_NE(message("seq:round=sideways").find("sideways"), std::string::npos);
  EXPECT_NE(message("{\"kind\": 3").find("malformed JSON"), std::string::npos);
  EXPECT_NE(message("{\"kind\": \"warp\"}").find("warp"), std::string::npos);
  EXPECT_NE(message("seq:round=stochastic").find("stochastic"), std::string::npos);
  // P3109's stochastic modes draw random bits too, which no accumulation model keys.
  for (const char* sr : {"stochastic-a", "stochastic-b", "stochastic-c"})
    EXPECT_NE(message(std::string("seq:round=") + sr).find("round cannot be stochastic"), std::string::npos) << sr;
}

// FP32 sequential without FMA is the plain float loop (this file is compiled with
// -ffp-contract=off), with FMA the std::fma loop: bit for bit, on FP32 and BF16 inputs.
TEST(AccumEqualities, Fp32SequentialIsThePlainFloatLoop) {
  const AccumModel seq = parse_accum_model("fp32-seq"), fma = parse_accum_model("fp32-fma");
  for (const Format* f : {&kFp32, &kBf16}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const size_t n = 1 + seed * 37;
      const auto a = normal_in(*f, n, seed, 1), b = normal_in(*f, n, seed, 2);
      const float c0 = static_cast<float>(seed) * 0.37f;
      float plain = c0, fused = c0;
      for (size_t i = 0; i < n; ++i) {
        const float p = a[i] * b[i];
        plain = plain + p;
        fused = std::fma(a[i], b[i], fused);
      }
      EXPECT_EQ(accum_dot(seq, a, b, c0, *f, *f), plain);
      EXPECT_EQ(accum_dot(fma, a, b, c0, *f, *f), fused);
    }
  }
}

// The generic (any-format) sequential path against the native float path: same model, forced
// through the exact-rounding code by naming fp32 as a custom e8m23 format.
TEST(AccumEqualities, GenericRoundingPathMatchesNativeFloat) {
  const AccumModel native = parse_accum_model("seq");
  const AccumModel generic = parse_accum_model("seq:acc=e8m23");
  const AccumModel native_f = parse_accum_model("seq:fma=1");
  const AccumModel generic_f = parse_accum_model("seq:acc=e8m23:fma=1");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto a = normal_in(kFp32, 300, seed, 3, 1e3), b = normal_in(kFp32, 300, seed, 4, 1e-3);
    EXPECT_EQ(accum_dot(native, a, b, 0, kFp32, kFp32), accum_dot(generic, a, b, 0, kFp32, kFp32));
    EXPECT_EQ(accum_dot(native_f, a, b, 0, kFp32, kFp32), accum_dot(generic_f, a, b, 0, kFp32, kFp32));
  }
}

cpp_int exact_scaled(const std::vector<float>& a, const std::vector<float>& b, double c) {
  cpp_int x = scaled(c);
  for (size_t i = 0; i < a.size(); ++i) {
    // a*b exactly: both are floats, so their product is exact in 106-bit integer arithmetic.
    int ea, eb;
    const double fa = std::frexp(std::fabs(double(a[i])), &ea), fb = std::frexp(std::fabs(double(b[i])), &eb);
    if (a[i] == 0 || b[i] == 0) continue;
    cpp_int p = cpp_int(static_cast<int64_t>(std::ldexp(fa, 24))) * static_cast<int64_t>(std::ldexp(fb, 24));
    p <<= (ea + eb - 48 + kShift);
    x += (std::signbit(a[i]) != std::signbit(b[i])) ? cpp_int(-p) : p;
  }
  return x;
}

TEST(AccumEqualities, ExactModelIsCorrectlyRounded) {
  const AccumModel ex = parse_accum_model("exact");
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    // Wide exponent spread and cancellation: the hard cases for a rounding.
    std::vector<float> a(64), b(64);
    for (size_t i = 0; i < a.size(); ++i) {
      const double e = std::floor(uniform01(seed, 5, i) * 80 - 40);
      a[i] = static_cast<float>(std::ldexp(standard_normal(seed, 6, i), static_cast<int>(e)));
      b[i] = static_cast<float>((i % 2 ? -1 : 1) * standard_normal(seed, 7, i));
    }
    a.push_back(a[0]);
    b.push_back(-b[0]);  // cancels the first product exactly
    const double r = accum_dot(ex, a, b, 0, kFp32, kFp32);
    EXPECT_TRUE(is_rne_float(exact_scaled(a, b, 0), static_cast<float>(r))) << "seed " << seed;
  }
}

// Block FMA with F wide enough to keep every aligned bit, one block over the whole dot and
// nearest-even: nothing is truncated, so it equals exact-then-round.
TEST(AccumEqualities, WideBlockFmaWithNearestEvenIsExactThenRound) {
  const AccumModel wide = parse_accum_model("block:n=256:F=48:final=nearest-even");
  const AccumModel ex = parse_accum_model("exact");
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const auto a = normal_in(kBf16, 256, seed, 8), b = normal_in(kBf16, 256, seed, 9);
    EXPECT_EQ(accum_dot(wide, a, b, 0, kBf16, kBf16), accum_dot(ex, a, b, 0, kBf16, kBf16)) << seed;
  }
}

// Kahan's compensated sum beats the recursive sum on ill-conditioned sums (BF16 and FP32
// accumulators): a large term whose ulp swallows each small one, many small terms, and the large
// one cancelled at the end. The recursive sum loses every small term; Kahan keeps them.
TEST(AccumEqualities, KahanBeatsSequentialOnIllConditionedSums) {
  for (const char* acc : {"bf16", "fp32"}) {
    const AccumModel seq = parse_accum_model(std::string("seq:acc=") + acc);
    const AccumModel kah = parse_accum_model(std::string("kahan:acc=") + acc);
    const AccumModel ex = parse_accum_model("exact:acc=fp64");
    const float big = std::string(acc) == "bf16" ? 256.0f : 16777216.0f;  // ulp 2 in each
    double err_seq = 0, err_kahan = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      const size_t n = 2000;
      std::vector<float> a = normal_in(kBf16, n, seed, 10), b(n, 1.0f);
      for (auto& v : a) v = std::fabs(v) * 0.01f;
      quantize(kBf16, a, a);
      a[0] = big;
      a.push_back(-big);
      b.push_back(1.0f);
      const double exact = accum_dot(ex, a, b, 0, kBf16, kBf16);
      const double es = std::fabs(accum_dot(seq, a, b, 0, kBf16, kBf16) - exact) / std::fabs(exact);
      const double ek = std::fabs(accum_dot(kah, a, b, 0, kBf16, kBf16) - exact) / std::fabs(exact);
      EXPECT_LE(ek, es) << acc << " seed " << seed;
      err_seq += es;
      err_kahan += ek;
    }
    EXPECT_GT(err_seq / 10, 0.9) << acc;  // the recursive sum lost (nearly) everything
    EXPECT_LT(err_kahan * 5, err_seq) << acc;
  }
}

// The long accumulator against the cpp_int oracle: products over the whole float range
// (subnormals included) with a double addend, rounded once to FP32 nearest-even.
TEST(LongAccumulator, CorrectlyRoundedOverTheWholeFloatRange) {
  const Format fp32 = kFp32;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const size_t n = 1 + seed % 50;
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      const int ea = static_cast<int>(std::floor(uniform01(seed, 11, i) * 276)) - 149;
      const int eb = static_cast<int>(std::floor(uniform01(seed, 12, i) * 276)) - 149;
      a[i] = static_cast<float>(std::ldexp(standard_normal(seed, 13, i), ea));
      b[i] = static_cast<float>(std::ldexp(standard_normal(seed, 14, i), eb));
      if (!std::isfinite(a[i] * double(b[i])) || std::fabs(a[i] * double(b[i])) > 1e36) a[i] = 1.0f;
    }
    const double c = std::ldexp(standard_normal(seed, 15, 0), static_cast<int>(seed % 200) - 100);
    const Rounded r = exact_dot(a, b, c, fp32);
    const float got = static_cast<float>(decode(fp32, r.code));
    EXPECT_TRUE(is_rne_float(exact_scaled(a, b, c), got)) << "seed " << seed;
  }
}

TEST(LongAccumulator, HugeCancellationsAndSigns) {
  LongAccumulator acc;
  acc.add(1e300);
  acc.add(0x1p-1074);
  acc.add(-1e300);
  EXPECT_EQ(acc.to_double(), 0x1p-1074);
  EXPECT_EQ(acc.sign(), 1);
  acc.add(-0x1p-1073);
  EXPECT_EQ(acc.sign(), -1);
  EXPECT_EQ(acc.to_double(), -0x1p-1074);
  // FP32 product range ends: the smallest subnormal squared is exact.
  LongAccumulator tiny;
  tiny.add_product(0x1p-149f, 0x1p-149f);
  EXPECT_EQ(tiny.to_double(), 0x1p-298);
  LongAccumulator bad;
  bad.add_product(INFINITY, 0.0f);
  EXPECT_TRUE(bad.is_nan());
  LongAccumulator inf;
  inf.add_product(INFINITY, -2.0f);
  EXPECT_EQ(inf.to_double(), -INFINITY);
}

TEST(AccumDot, MismatchedLengthsAreRejected) {
  const std::vector<float> a(3, 1.0f), b(4, 1.0f);
  EXPECT_THROW(accum_dot(parse_accum_model("fp32-seq"), a, b, 0, kFp32, kFp32), std::invalid_argument);
}

}  // namespace
}  // namespace precsim

// Differential test against a second implementation: the host paths of CUDA's conversion headers
// (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cuda_fp6.h, cuda_fp4.h, CUDA 12.8+/13), compiled with plain
// g++ (no -D flags needed). Float32 inputs: a prime-strided sweep over all 2^32 bit patterns plus
// every pattern within a few ulps of each value and midpoint of the target; PRECSIM_FULL_SWEEP=1
// runs all 2^32. Double inputs (the __nv_cvt_double_* and __double2* conversions) beside every
// rounding boundary. Codes -> float exhaustively for every format.
//
// Deliberate differences, each checked explicitly below rather than skipped:
// - NaN payloads: CUDA writes 0x7fff (fp16, bf16) and 0x7f (both fp8 kinds) for a NaN input; we
//   write the quiet NaN with only the top mantissa bit (0x7e00, 0x7fc0, 0x7e for E5M2), as
//   ml_dtypes does. Both are NaN; only NaN-ness is compared for NaN inputs.
// - e8m0 of a negative x: CUDA converts |x|; e8m0 is unsigned, so we return NaN (kInvalid).
// Agreements worth stating: FP6/FP4 have no NaN and both map NaN to +max; 0 -> e8m0 0x00
// (2^-127, as it has no zero); E4M3 overflow without saturation is NaN with the sign (0xff).
#include <gtest/gtest.h>
#include <omp.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

#include "precsim/formats/rounding.h"
#include "reference_rounding.h"

namespace precsim {
namespace {

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

struct Conversion {
  std::string name;
  Format format;
  QuantOptions opts;
  std::function<uint64_t(float)> cuda;          // the float -> format conversion
  std::function<uint64_t(double)> cuda_double;  // the double -> format conversion
  bool unsigned_abs = false;                    // CUDA converts |x| (e8m0)
};

QuantOptions make_opts(Rounding r, Overflow ov) {
  QuantOptions o;
  o.rounding = r;
  o.overflow = ov;
  return o;
}

std::vector<Conversion> conversions() {
  const auto RNE = Rounding::kNearestEven;
  const auto IEEE = Overflow::kIeee, SAT = Overflow::kSaturate;
  std::vector<Conversion> c;
  c.push_back({"__float2half_rn", format_by_name("fp16"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __half_raw(__float2half_rn(x)).x; },
               [](double x) -> uint64_t { return __half_raw(__double2half(x)).x; }});
  c.push_back({"__float2bfloat16_rn", format_by_name("bf16"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_bfloat16_raw(__float2bfloat16_rn(x)).x; },
               [](double x) -> uint64_t { return __nv_bfloat16_raw(__double2bfloat16(x)).x; }});
  c.push_back({"fp8 E4M3 SATFINITE", format_by_name("e4m3"), make_opts(RNE, SAT),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }});
  c.push_back({"fp8 E4M3 NOSAT", format_by_name("e4m3"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3); }});
  c.push_back({"fp8 E5M2 SATFINITE", format_by_name("e5m2"), make_opts(RNE, SAT),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }});
  c.push_back({"fp8 E5M2 NOSAT", format_by_name("e5m2"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2); }});
  c.push_back({"fp6 E2M3", format_by_name("e2m3"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp6(x, __NV_E2M3, cudaRoundNearest); }});
  c.push_back({"fp6 E3M2", format_by_name("e3m2"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp6(x, __NV_E3M2, cudaRoundNearest); }});
  c.push_back({"fp4 E2M1", format_by_name("e2m1"), make_opts(RNE, IEEE),
               [](float x) -> uint64_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); },
               [](double x) -> uint64_t { return __nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundNearest); }});
  const Format e8m0 = format_by_name("e8m0");
  for (const auto& [rname, cr, ours] : {std::tuple{"RZ", cudaRoundZero, Rounding::kTowardZero},
                                         std::tuple{"RP", cudaRoundPosInf, Rounding::kUp}}) {
    for (const auto& [sname, cs, ov] : {std::tuple{"SATFINITE", __NV_SATFINITE, SAT},
                                        std::tuple{"NOSAT", __NV_NOSAT, IEEE}}) {
      const auto r = cr;
      const auto s = cs;
      c.push_back({std::string("e8m0 ") + rname + " " + sname, e8m0, make_opts(ours, ov),
                   [r, s](float x) -> uint64_t { return __nv_cvt_float_to_e8m0(x, s, r); },
                   [r, s](double x) -> uint64_t { return __nv_cvt_double_to_e8m0(x, s, r); }, true});
    }
  }
  return c;
}

struct Tally {
  uint64_t checked = 0, mismatches = 0, nan_payload = 0, negative_e8m0 = 0;
  std::vector<std::string> first;
};

// Compares one input; the two documented differences are checked, not skipped.
template <typename T>
void compare_one(const Conversion& c, T x, Tally& t) {
  ++t.checked;
  uint64_t cuda;
  if constexpr (std::is_same_v<T, float>) cuda = c.cuda(x);
  else cuda = c.cuda_double(x);
  const Rounded ours = encode(c.format, double(x), c.opts);
  bool ok = cuda == ours.code;
  if (!ok && std::isnan(x)) {
    ok = is_nan_code(c.format, cuda) && is_nan_code(c.format, ours.code);
    t.nan_payload += ok;
  } else if (!ok && c.unsigned_abs && std::signbit(x) && x != 0) {
    ok = is_nan_code(c.format, ours.code) && (ours.status & kInvalid) &&
         encode(c.format, std::fabs(double(x)), c.opts).code == cuda;
    t.negative_e8m0 += ok;
  }
  if (!ok) {
    ++t.mismatches;
    if (t.first.size() < 8) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s: x=%a cuda 0x%llx ours 0x%llx", c.name.c_str(), double(x),
                    static_cast<unsigned long long>(cuda), static_cast<unsigned long long>(ours.code));
      t.first.push_back(buf);
    }
  }
}

void run_sweep(const std::vector<uint32_t>& patterns, bool also_strided_full) {
  const auto convs = conversions();
  std::vector<Tally> tallies(convs.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t ci = 0; ci < convs.size(); ++ci) {
    for (const uint32_t b : patterns) compare_one(convs[ci], from_bits(b), tallies[ci]);
    if (also_strided_full) {
      for (uint64_t b = 0; b <= 0xffffffffu; ++b) compare_one(convs[ci], from_bits(uint32_t(b)), tallies[ci]);
    }
  }
  for (size_t ci = 0; ci < convs.size(); ++ci) {
    const Tally& t = tallies[ci];
    std::string detail;
    for (const auto& s : t.first) detail += "\n  " + s;
    EXPECT_EQ(t.mismatches, 0u) << convs[ci].name << ": " << t.mismatches << " of " << t.checked << detail;
    std::printf("%-22s %12llu inputs, %llu mismatches, %llu NaN-payload differences, %llu negative-e8m0 (|x|) differences\n",
                convs[ci].name.c_str(), static_cast<unsigned long long>(t.checked),
                static_cast<unsigned long long>(t.mismatches), static_cast<unsigned long long>(t.nan_payload),
                static_cast<unsigned long long>(t.negative_e8m0));
  }
}

TEST(CudaHeaders, FloatToFormatMatchesOnStridedSweepAndBoundaries) {
  const bool full = std::getenv("PRECSIM_FULL_SWEEP") && std::string(std::getenv("PRECSIM_FULL_SWEEP")) == "1";
  std::vector<uint32_t> patterns =
      reference::float32_boundary_patterns({"fp16", "bf16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0"});
  // A prime stride visits every exponent and, stride being odd and not a multiple of a power of
  // two, every residue of the low mantissa bits; the offset moves the start off zero.
  constexpr uint64_t kStride = 1009;
  if (!full)
    for (uint64_t b = 12345; b <= 0xffffffffu; b += kStride) patterns.push_back(uint32_t(b));
  std::printf("%zu float32 patterns%s\n", patterns.size(), full ? " + all 2^32" : "");
  run_sweep(patterns, full);
}

// The double -> format conversions, on doubles that no float holds: the points just beside
// every rounding boundary of the targets (a float path would round them twice) and random values.
TEST(CudaHeaders, DoubleToFormatMatchesWithoutDoubleRounding) {
  std::vector<double> xs;
  for (const char* name : {"fp16", "bf16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0"}) {
    const auto vals = reference::positive_values(format_by_name(name));
    for (size_t i = 0; i + 1 < vals.size(); ++i) {
      const double a = vals[i].v, b = vals[i + 1].v, mid = a + (b - a) / 2;
      for (const double p : {a, mid, b + (b - a) / 2})
        for (const double eps : {0x1p-40, 0x1p-30, 0x1p-52})
          for (const double sgn : {1.0, -1.0}) {
            xs.push_back(sgn * (p + p * eps));
            xs.push_back(sgn * (p - p * eps));
          }
    }
  }
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-140, 140);
  for (int i = 0; i < 1000000; ++i) xs.push_back(std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1 : 1));
  for (const double special : {0.0, -0.0, 1e300, -1e300, 4.9e-324, double(INFINITY), -double(INFINITY), double(NAN)})
    xs.push_back(special);
  const auto convs = conversions();
  for (const Conversion& c : convs) {
    Tally t;
    for (const double x : xs) compare_one(c, x, t);
    std::string detail;
    for (const auto& s : t.first) detail += "\n  " + s;
    EXPECT_EQ(t.mismatches, 0u) << c.name << " (double): " << t.mismatches << " of " << t.checked << detail;
  }
  std::printf("%zu double inputs per conversion\n", xs.size());
}

// Every code of each format decodes to the same value as CUDA's code -> half/bf16 conversion.
TEST(CudaHeaders, CodesDecodeLikeCuda) {
  auto half_of = [](__half_raw h) { return double(__half2float(__half(h))); };
  struct Dec {
    const char* format;
    std::function<double(uint32_t)> cuda;
  };
  const Dec decs[] = {
      {"fp16", [&](uint32_t c) { __half_raw h; h.x = uint16_t(c); return half_of(h); }},
      {"bf16", [](uint32_t c) { __nv_bfloat16_raw h; h.x = uint16_t(c); return double(__bfloat162float(__nv_bfloat16(h))); }},
      {"e4m3", [&](uint32_t c) { return half_of(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3)); }},
      {"e5m2", [&](uint32_t c) { return half_of(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E5M2)); }},
      {"e2m3", [&](uint32_t c) { return half_of(__nv_cvt_fp6_to_halfraw(__nv_fp6_storage_t(c), __NV_E2M3)); }},
      {"e3m2", [&](uint32_t c) { return half_of(__nv_cvt_fp6_to_halfraw(__nv_fp6_storage_t(c), __NV_E3M2)); }},
      {"e2m1", [&](uint32_t c) { return half_of(__nv_cvt_fp4_to_halfraw(__nv_fp4_storage_t(c), __NV_E2M1)); }},
      {"e8m0", [](uint32_t c) { return double(__bfloat162float(__nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(__nv_fp8_storage_t(c))))); }},
  };
  for (const Dec& d : decs) {
    const Format f = format_by_name(d.format);
    int bad = 0;
    for (uint32_t c = 0; c < (1u << f.bits()); ++c) {
      const double ours = decode(f, c), cuda = d.cuda(c);
      const bool same = std::isnan(ours) ? std::isnan(cuda) : ours == cuda && std::signbit(ours) == std::signbit(cuda);
      if (!same && ++bad <= 5) ADD_FAILURE() << d.format << " code 0x" << std::hex << c << ": ours " << ours << " cuda " << cuda;
    }
    EXPECT_EQ(bad, 0) << d.format;
  }
}

// The documented differences and agreements, stated as values.
TEST(CudaHeaders, DocumentedSemantics) {
  const Format e8m0 = format_by_name("e8m0"), e2m1 = format_by_name("e2m1"), e4m3 = format_by_name("e4m3");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(__nv_cvt_float_to_e8m0(-3.0f, __NV_SATFINITE, cudaRoundPosInf), 0x81);  // |x| -> 4
  EXPECT_EQ(encode(e8m0, -3.0, make_opts(Rounding::kUp, Overflow::kSaturate)).code, 0xffu);
  EXPECT_EQ(__nv_cvt_float_to_e8m0(0.0f, __NV_SATFINITE, cudaRoundZero), 0x00);
  EXPECT_EQ(encode(e8m0, 0.0).code, 0x00u);
  EXPECT_EQ(__nv_cvt_float_to_fp4(nan, __NV_E2M1, cudaRoundNearest), 0x07);
  EXPECT_EQ(encode(e2m1, double(nan)).code, 0x07u);
  EXPECT_EQ(__nv_cvt_float_to_fp8(-465.0f, __NV_NOSAT, __NV_E4M3), 0xff);
  EXPECT_EQ(encode(e4m3, -465.0).code, 0xffu);
  EXPECT_EQ(__nv_cvt_float_to_fp8(nan, __NV_NOSAT, __NV_E5M2), 0x7f);
  EXPECT_EQ(encode(format_by_name("e5m2"), double(nan)).code, 0x7eu);
  EXPECT_EQ(__half_raw(__float2half_rn(nan)).x, 0x7fff);
  EXPECT_EQ(encode(format_by_name("fp16"), double(nan)).code, 0x7e00u);
}

}  // namespace
}  // namespace precsim

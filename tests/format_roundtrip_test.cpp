// Every code of every format of 16 bits or fewer (and TF32) decodes to the value its fields define
// and re-encodes to itself under every rounding mode; the array API agrees with the scalar one.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "reference_rounding.h"

namespace precsim {
namespace {

// Presets of at most 16 bits, TF32, and custom rows that exercise each option of the spec.
std::vector<std::string> roundtrip_formats() {
  std::vector<std::string> names;
  for (const auto& p : format_presets())
    if (p.format.bits() <= 19) names.push_back(p.format.name);
  for (const char* c : {"e5m7", "e3m2:nosub", "e4m3:bias=8:fnuz", "e4m3:unsigned", "e5m0:nanonly",
                        "e2m0:finite", "e3m3:nosub:nanonly", "e6m9", "e1m2:finite", "e4m3:nosub:fnuz",
                        "e5m2:unsigned:finite", "e8m0:nanonly:unsigned:bias=120"})
    names.push_back(c);
  return names;
}

const Rounding kModes[] = {Rounding::kNearestEven, Rounding::kNearestAway, Rounding::kTowardZero,
                           Rounding::kUp,          Rounding::kDown,        Rounding::kOdd,
                           Rounding::kStochastic};

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class Roundtrip : public ::testing::TestWithParam<std::string> {};

TEST_P(Roundtrip, DecodeMatchesFieldDefinition) {
  const Format f = format_by_name(GetParam());
  const auto vals = reference::positive_values(f);
  ASSERT_FALSE(vals.empty());
  EXPECT_EQ(vals.back().v, f.max_finite());
  uint64_t finite = 0;
  for (const auto& v : vals) {
    ASSERT_EQ(decode(f, v.mag), v.v) << "code 0x" << std::hex << v.mag;
    ASSERT_EQ(ordinal(f, v.mag), int64_t(finite)) << "code 0x" << std::hex << v.mag;
    ++finite;
    if (!f.is_signed || v.v == 0) continue;
    const uint64_t neg = reference::signed_code(f, true, v.mag);
    EXPECT_EQ(decode(f, neg), -v.v) << "code 0x" << std::hex << neg;
    EXPECT_EQ(ordinal(f, neg), -ordinal(f, v.mag));
  }
  EXPECT_EQ(f.finite_count(), f.is_signed ? (f.has_zero ? 2 * finite - 1 : 2 * finite) : finite);
}

TEST_P(Roundtrip, EveryCodeReencodesToItselfInEveryMode) {
  const Format f = format_by_name(GetParam());
  const uint64_t ncodes = uint64_t{1} << f.bits();
  uint64_t failures = 0;
  for (const Overflow ov : {Overflow::kIeee, Overflow::kSaturate}) {
    for (const Rounding r : kModes) {
      for (const int k : {32, 3}) {
        if (k != 32 && r != Rounding::kStochastic) continue;
        QuantOptions o;
        o.rounding = r;
        o.overflow = ov;
        o.sr_bits = k;
        o.sr_key.seed = 42;
        for (uint64_t c = 0; c < ncodes; ++c) {
          if (!f.is_canonical(c)) continue;
          const double v = decode(f, c);
          const Rounded got = encode(f, v, o, c);
          bool ok;
          if (is_nan_code(f, c)) ok = is_nan_code(f, got.code);
          else if (is_inf_code(f, c) && ov == Overflow::kSaturate) ok = got.code == max_code(f, v < 0);
          else ok = got.code == c && (got.status & kInexact) == 0;
          if (!ok && ++failures <= 10) {
            ADD_FAILURE() << f.name << " code 0x" << std::hex << c << " (" << v << ") -> 0x" << got.code
                          << std::dec << " status " << status_to_string(got.status) << " mode "
                          << to_string(r) << " k=" << k << " overflow " << to_string(ov);
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST_P(Roundtrip, FlushSubnormalsZeroesExactlyTheSubnormals) {
  const Format f = format_by_name(GetParam());
  QuantOptions o;
  o.flush_subnormals = true;
  for (const auto& v : reference::positive_values(f)) {
    const Rounded got = encode(f, v.v, o);
    if (f.has_zero && v.v != 0 && v.v < f.min_normal()) {
      EXPECT_EQ(got.code, 0u) << v.v;
      EXPECT_TRUE(got.status & kUnderflowToZero) << v.v;
    } else {
      EXPECT_EQ(got.code, v.mag) << v.v;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Roundtrip, ::testing::ValuesIn(roundtrip_formats()), test_name);

// Values of every kind for the array tests: all codes' values, midpoints, out of range, NaN, Inf.
std::vector<double> array_inputs(const Format& f) {
  std::vector<double> xs;
  const auto vals = reference::positive_values(f);
  for (size_t i = 0; i < vals.size(); ++i) {
    for (const double s : {1.0, -1.0}) {
      xs.push_back(s * vals[i].v);
      if (i + 1 < vals.size()) {
        xs.push_back(s * (0.5 * (vals[i].v + vals[i + 1].v)));
        xs.push_back(s * (0.3 * vals[i].v + 0.7 * vals[i + 1].v));
      }
    }
  }
  for (const double x : {1e30, -1e30, double(INFINITY), -double(INFINITY), double(NAN), 1e-30, -1e-30})
    xs.push_back(x);
  std::vector<double> big;
  while (big.size() < 300000) big.insert(big.end(), xs.begin(), xs.end());  // > 4 chunks of 2^16
  return big;
}

TEST(ArrayApi, MatchesScalarEncodeAndCountsStatuses) {
  for (const char* name : {"e4m3", "e5m2", "fp16", "bf16", "e2m1", "e3m2:nosub", "int8", "e8m0"}) {
    const Format f = format_by_name(name);
    const std::vector<double> xs = array_inputs(f);
    std::vector<float> xf(xs.begin(), xs.end());
    for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTowardZero}) {
      QuantOptions o;
      o.rounding = r;
      o.sr_key.seed = 7;
      const uint64_t base = 12345;
      // Independent counts from the scalar routine's statuses, tallied here bit by bit.
      uint64_t inexact = 0, uflow = 0, sub = 0, oflow = 0, sat = 0, nan = 0;
      std::vector<uint64_t> want(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        const Rounded rd = encode(f, double(xf[i]), o, base + i);
        want[i] = rd.code;
        inexact += (rd.status & kInexact) != 0;
        uflow += (rd.status & kUnderflowToZero) != 0;
        sub += (rd.status & kSubnormalResult) != 0;
        oflow += (rd.status & kOverflow) != 0;
        sat += (rd.status & kSaturated) != 0;
        nan += (rd.status & (kNanResult | kInvalid)) != 0;
      }
      for (const int threads : {1, 2}) {
        omp_set_num_threads(threads);
        SCOPED_TRACE(std::string(name) + " " + std::string(to_string(r)) + " threads " + std::to_string(threads));
        std::vector<uint8_t> codes(xs.size() * code_bytes(f));
        QuantStats st;
        encode_array(f, std::span<const float>(xf), codes.data(), o, &st, base);
        const size_t w = code_bytes(f);
        size_t bad = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
          uint64_t c = 0;
          for (size_t b = 0; b < w; ++b) c |= uint64_t{codes[i * w + b]} << (8 * b);
          bad += c != want[i];
        }
        EXPECT_EQ(bad, 0u);
        EXPECT_EQ(st.count, xs.size());
        EXPECT_EQ(st.inexact, inexact);
        EXPECT_EQ(st.underflow_to_zero, uflow);
        EXPECT_EQ(st.subnormal, sub);
        EXPECT_EQ(st.overflow, oflow);
        EXPECT_EQ(st.saturated, sat);
        EXPECT_EQ(st.nan, nan);

        std::vector<float> q(xf.size());
        QuantStats st2;
        quantize(f, std::span<const float>(xf), std::span<float>(q), o, &st2, base);
        EXPECT_EQ(st2, st);
        std::vector<double> qd(xs.size());
        std::vector<double> xd(xf.begin(), xf.end());
        quantize(f, std::span<const double>(xd), std::span<double>(qd), o, nullptr, base);
        std::vector<float> dec(xs.size());
        decode_array(f, codes.data(), std::span<float>(dec));
        size_t bad_values = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
          const double want_v = decode(f, want[i]);
          const bool same = std::isnan(want_v) ? std::isnan(q[i]) && std::isnan(qd[i]) && std::isnan(dec[i])
                                               : (double(q[i]) == want_v && qd[i] == want_v && double(dec[i]) == want_v &&
                                                  std::signbit(q[i]) == std::signbit(want_v));
          bad_values += !same;
        }
        EXPECT_EQ(bad_values, 0u);
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(ArrayApi, SplitArraysGiveTheSameStochasticBits) {
  const Format f = format_by_name("e5m2");
  std::vector<float> xs(100000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f + float(i % 977) / 977.0f;
  QuantOptions o;
  o.rounding = Rounding::kStochastic;
  o.sr_key = {3, 4, 5, 6};
  std::vector<float> whole(xs.size()), parts(xs.size());
  quantize(f, std::span<const float>(xs), std::span<float>(whole), o);
  const size_t cut = 31337;
  quantize(f, std::span<const float>(xs).first(cut), std::span<float>(parts).first(cut), o, nullptr, 0);
  quantize(f, std::span<const float>(xs).subspan(cut), std::span<float>(parts).subspan(cut), o, nullptr, cut);
  EXPECT_EQ(whole, parts);
}

TEST(ArrayApi, NibblePackingRoundTrips) {
  std::vector<uint8_t> codes{1, 2, 3, 4, 5, 15, 0};
  std::vector<uint8_t> packed((codes.size() + 1) / 2), back(codes.size());
  pack_nibbles(codes, packed);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x21, 0x43, 0xf5, 0x00}));
  unpack_nibbles(packed, back);
  EXPECT_EQ(back, codes);
  std::vector<uint8_t> wrong(2);
  EXPECT_THROW(pack_nibbles(codes, wrong), std::invalid_argument);
}

}  // namespace
}  // namespace precsim

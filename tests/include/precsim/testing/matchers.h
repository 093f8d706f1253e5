// GoogleTest matchers for users' tests:
//   EXPECT_THAT(x, precsim::testing::EqualsInFormat("e4m3", 416.0));
//   EXPECT_THAT(x, precsim::testing::WithinUlpsInFormat("bf16", 2, reference));
// Values are compared by their codes in the named format (NaN equals NaN).
#pragma once

#include <gmock/gmock.h>

#include <cstdlib>
#include <string>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"

namespace precsim::testing {

class WithinUlpsMatcher {
 public:
  using is_gtest_matcher = void;
  WithinUlpsMatcher(const std::string& format, int64_t ulps, double expected)
      : f_(format_by_name(format)), ulps_(ulps), expected_(expected) {}

  bool MatchAndExplain(double actual, std::ostream* os) const {
    const uint64_t ce = encode(f_, expected_).code, ca = encode(f_, actual).code;
    if (os) *os << "code 0x" << std::hex << ca << " vs expected 0x" << ce << std::dec;
    if (is_nan_code(f_, ce) || is_nan_code(f_, ca)) return is_nan_code(f_, ce) && is_nan_code(f_, ca);
    if (is_inf_code(f_, ce) || is_inf_code(f_, ca)) return ce == ca;
    const int64_t d = std::llabs(ordinal(f_, ca) - ordinal(f_, ce));
    if (os) *os << ", " << d << " ulps apart in " << f_.name;
    return d <= ulps_;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "is within " << ulps_ << " ulps of " << expected_ << " in " << f_.name;
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is more than " << ulps_ << " ulps from " << expected_ << " in " << f_.name;
  }

 private:
  Format f_;
  int64_t ulps_;
  double expected_;
};

inline ::testing::Matcher<double> WithinUlpsInFormat(const std::string& format, int64_t ulps, double expected) {
  return WithinUlpsMatcher(format, ulps, expected);
}
inline ::testing::Matcher<double> EqualsInFormat(const std::string& format, double expected) {
  return WithinUlpsMatcher(format, 0, expected);
}

}  // namespace precsim::testing

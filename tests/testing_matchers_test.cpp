// The matchers and comparison helper offered to users' tests (tests/include/precsim/testing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "precsim/testing/compare.h"
#include "precsim/testing/matchers.h"

namespace precsim::testing {
namespace {

using ::testing::Not;

TEST(Matchers, EqualsInFormatComparesCodes) {
  EXPECT_THAT(3.25, EqualsInFormat("e4m3", 3.25));
  // 3.2 and 3.25 share the E4M3 code 0x45 though the doubles differ.
  EXPECT_THAT(3.2, EqualsInFormat("e4m3", 3.25));
  EXPECT_THAT(3.5, Not(EqualsInFormat("e4m3", 3.25)));
  EXPECT_THAT(std::nan(""), EqualsInFormat("bf16", std::nan("")));
  EXPECT_THAT(1.0, Not(EqualsInFormat("bf16", std::nan(""))));
}

TEST(Matchers, WithinUlpsCountsRepresentableValues) {
  // bf16 around 1: spacing 2^-7 above, 2^-8 below; -2^-8 and +2^-7 are one ulp each.
  EXPECT_THAT(1.0 + 0x1p-7, WithinUlpsInFormat("bf16", 1, 1.0));
  EXPECT_THAT(1.0 - 0x1p-8, WithinUlpsInFormat("bf16", 1, 1.0));
  EXPECT_THAT(1.0 + 0x1p-6, Not(WithinUlpsInFormat("bf16", 1, 1.0)));
  EXPECT_THAT(1.0 + 0x1p-6, WithinUlpsInFormat("bf16", 2, 1.0));
  // Across zero: -min_subnormal and +min_subnormal are two ulps apart (one each side of 0).
  EXPECT_THAT(-0x1p-9, WithinUlpsInFormat("e4m3", 2, 0x1p-9));
  EXPECT_THAT(-0x1p-9, Not(WithinUlpsInFormat("e4m3", 1, 0x1p-9)));
}

TEST(Compare, ReportsFirstMismatchesWithCodes) {
  const Format f = format_by_name("e4m3");
  const std::vector<double> exp{1, 2, 3, 4, 5};
  const std::vector<double> act{1, 2.25, 3, 4.5, 5};
  const Comparison c = compare_in_format(f, exp, act);
  ASSERT_EQ(c.mismatches, 2u);
  EXPECT_EQ(c.first[0].index, 1u);
  EXPECT_EQ(c.first[0].expected_code, 0x40u);
  EXPECT_EQ(c.first[0].actual_code, 0x41u);
  EXPECT_EQ(c.first[1].index, 3u);
  EXPECT_EQ(c.max_ulps, 1);
  EXPECT_NE(c.describe(f).find("[1] expected 2 (code 0x40), got 2.25 (code 0x41), 1 ulps"), std::string::npos)
      << c.describe(f);
  EXPECT_TRUE(compare_in_format(f, exp, act, 1).ok());
}

}  // namespace
}  // namespace precsim::testing

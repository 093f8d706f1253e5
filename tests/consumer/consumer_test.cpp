// Compiled against the installed precsim package only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"
#include "precsim/testing/compare.h"
#include "precsim/testing/matchers.h"

TEST(Consumer, RoundsThroughTheInstalledLibrary) {
  const precsim::Format e4m3 = precsim::format_by_name("float8_e4m3fn");
  EXPECT_EQ(precsim::round_to(e4m3, 400.0), 384.0);
  EXPECT_THAT(precsim::round_to(e4m3, 3.14159), precsim::testing::EqualsInFormat("e4m3", 3.25));
  const std::vector<double> a{1.0, 2.0}, b{1.0, 2.25};
  const auto c = precsim::testing::compare_in_format(e4m3, a, b);
  EXPECT_EQ(c.mismatches, 1u);
}

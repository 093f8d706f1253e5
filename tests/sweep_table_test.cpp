// The sweep table as `precsim sweep` and `report summary` print it: axes named as the plan names
// them, intervals only where there are several seeds, a legend, and per variant its held-out loss
// against the reference's over the points.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include <nlohmann/json.hpp>

#include "precsim/sim/experiment/sweep_merge.h"

namespace precsim {
namespace {

using nlohmann::json;

json metric(double mean, double lo, double hi) { return {{"mean", mean}, {"lo", lo}, {"hi", hi}}; }

json point(int hidden, const char* variant, size_t seeds, double heldout) {
  return {{"point", {{"model.hidden", {hidden}}}}, {"variant", variant}, {"units", seeds}, {"diverged", 0},
          {"final_loss", metric(heldout - 0.1, heldout - 0.2, heldout)},
          {"heldout_loss", metric(heldout, heldout - 0.05, heldout + 0.05)}};
}

json results(size_t seeds) {
  json pts = json::array();
  const double ref[] = {2.5, 2.0}, mx[] = {2.25, 1.5};
  for (int i = 0; i < 2; ++i) {
    pts.push_back(point(8 << i, "reference", seeds, ref[i]));
    pts.push_back(point(8 << i, "mxfp4", seeds, mx[i]));
  }
  return {{"points", pts}, {"missing", json::array()}};
}

TEST(SweepTable, OneSeedGivesNoIntervalAndTheGapsAreFound) {
  const std::string t = sweep_points_table(results(1));
  EXPECT_NE(t.find("model.hidden=[8]"), std::string::npos) << t;
  EXPECT_EQ(t.find("[95%]"), std::string::npos) << t;  // no interval column with one seed
  EXPECT_EQ(t.find("[2.45"), std::string::npos) << t;
  EXPECT_NE(t.find("1 seed per point: no interval"), std::string::npos) << t;
  // mxfp4 - reference: 2.25 - 2.5 at hidden 8, 1.5 - 2.0 at hidden 16.
  EXPECT_NE(t.find(fmt::format("mxfp4: held-out loss {:+.4g} (model.hidden=[16]) to {:+.4g} (model.hidden=[8])",
                               1.5 - 2.0, 2.25 - 2.5)),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("legend:\n  point "), std::string::npos) << t;
}

TEST(SweepTable, SeveralSeedsGiveIntervalsAndMissingUnitsAreSaid) {
  json r = results(3);
  r["missing"] = {"unit-7", "unit-9"};
  const std::string t = sweep_points_table(r);
  EXPECT_NE(t.find("heldout loss [95%]"), std::string::npos) << t;
  EXPECT_NE(t.find("2.5 [2.45, 2.55]"), std::string::npos) << t;
  EXPECT_EQ(t.find("no interval"), std::string::npos) << t;
  EXPECT_NE(t.find("2 planned units not finished"), std::string::npos) << t;
}

}  // namespace
}  // namespace precsim

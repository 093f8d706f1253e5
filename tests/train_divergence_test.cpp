// Divergence detection on runs that blow up: SGD at lr 30 makes the FP64 reference's loss grow by
// about 10^3 a step, and each variant's diverged_at must be the first step whose loss is not
// finite, or above divergence_factor x the reference's loss and above the reference's initial
// loss, computed here from the per-step loss series (log_every 1); the variant stops there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

using json = nlohmann::json;

double loss_at(const json& series, size_t i) {
  const json& v = series.at("loss").at(i);
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();  // "nan", "inf" strings
}

TEST(Divergence, DivergedAtIsTheFirstNonFiniteLossOrLossBeyondTheFactor) {
  const json c = json::parse(R"({"steps": 8, "batch": 32, "shadow_every": 0, "log_every": 1, "eval_every": 0,
    "divergence_factor": 1.5, "data": {"features": 8, "classes": 4, "train_size": 256, "heldout_size": 64},
    "model": {"hidden": [16]}, "optimizer": {"kind": "sgd", "lr": 30.0, "momentum": 0.0},
    "recipes": ["fp32", "fp16-noscale", "mxfp4", "fp8-current"]})");
  const json r = run_training(train_config_from_json(c));
  const json& run = r.at("runs").at(0);
  const json& ref = run.at("reference").at("series");
  const double ref0 = loss_at(ref, 0);
  std::map<std::string, json> diverged;
  for (const json& v : run.at("variants")) {
    const std::string name = v.at("name");
    int64_t expect = -1;
    for (size_t s = 0; s < 8 && expect < 0; ++s) {
      const double l = loss_at(v.at("series"), s);
      if (!std::isfinite(l) || (l > 1.5 * loss_at(ref, s) && l > ref0)) expect = int64_t(s);
    }
    const json& got = v.at("summary").at("diverged_at");
    diverged[name] = got;
    if (expect < 0) {
      EXPECT_TRUE(got.is_null()) << name;
      EXPECT_EQ(v.at("series").at("loss").size(), 8u) << name;
    } else {
      EXPECT_EQ(got, expect) << name;
      EXPECT_EQ(v.at("series").at("loss").size(), size_t(expect + 1)) << name << ": the variant stops where it diverged";
    }
  }
  // Both ways of diverging occur (measured): fp16-noscale's loss is NaN at step 2; mxfp4's is
  // finite at step 5, 3.6x the reference's; FP32 follows the reference.
  EXPECT_EQ(diverged["fp16-noscale"], 2);
  EXPECT_FALSE(std::isfinite(loss_at(run.at("variants").at(1).at("series"), 2)));
  EXPECT_EQ(diverged["mxfp4"], 5);
  EXPECT_TRUE(std::isfinite(loss_at(run.at("variants").at(2).at("series"), 5)));
  EXPECT_TRUE(diverged["fp32"].is_null());
}

}  // namespace
}  // namespace precsim

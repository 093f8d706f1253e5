// GradScaler semantics (docs/reference/sources.md §4.3) on scripted inf/finite sequences, values by hand.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "precsim/sim/train/loss_scaler.h"

namespace precsim {
namespace {

LossScaling dynamic(double init, int interval) {
  LossScaling c;
  c.mode = LossScaleMode::kDynamic;
  c.init_scale = init;
  c.growth_interval = interval;
  return c;
}

TEST(LossScaler, DefaultsArePyTorchs) {
  const LossScaling c;
  EXPECT_EQ(c.init_scale, 65536.0);
  EXPECT_EQ(c.growth_factor, 2.0);
  EXPECT_EQ(c.backoff_factor, 0.5);
  EXPECT_EQ(c.growth_interval, 2000);
}

TEST(LossScaler, ScriptedTrajectoryMatchesHandValues) {
  // interval 3: F F I F F F F F F I I F F F
  LossScaler s(dynamic(65536.0, 3));
  const std::vector<bool> inf = {false, false, true, false, false, false, false, false, false, true, true,
                                 false, false, false};
  // By hand: two clean steps (tracker 2), inf halves to 32768 and resets; three clean steps grow to
  // 65536; three more to 131072; two infs: 65536, 32768; three clean: 65536.
  const std::vector<float> scale = {65536, 65536, 32768, 32768, 32768, 65536, 65536, 65536, 131072,
                                    65536, 32768, 32768, 32768, 65536};
  const std::vector<int> tracker = {1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0, 1, 2, 0};
  for (size_t i = 0; i < inf.size(); ++i) {
    s.update(inf[i]);
    EXPECT_EQ(s.scale(), scale[i]) << "after update " << i;
    EXPECT_EQ(s.growth_tracker(), tracker[i]) << "after update " << i;
  }
}

TEST(LossScaler, GrowthToInfinityIsRejected) {
  LossScaler s(dynamic(3.0e38, 1));
  s.update(false);  // 6e38 is not a finite float: the scale stays
  EXPECT_EQ(s.scale(), 3.0e38f);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, ScaleMayFallBelowOne) {
  LossScaler s(dynamic(1.0, 2000));
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 0.25f);
}

TEST(LossScaler, UnscaleUsesFp32ReciprocalFromDoubleAndReportsNonFinite) {
  LossScaling c = dynamic(3.0, 2000);  // 1/3 is inexact: float(1.0/3.0)
  LossScaler s(c);
  const float inv = static_cast<float>(1.0 / 3.0);
  EXPECT_EQ(s.inv_scale(), inv);
  std::vector<float> g = {3.0f, -6.0f, 1e-30f};
  EXPECT_FALSE(s.unscale(g));
  EXPECT_EQ(g[0], 3.0f * inv);
  EXPECT_EQ(g[1], -6.0f * inv);
  EXPECT_EQ(g[2], 1e-30f * inv);
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  EXPECT_TRUE(s.unscale(bad));
  EXPECT_EQ(bad[2], 2.0f * inv);  // unscaled even when an inf/NaN is found
  std::vector<float> inf = {std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(s.unscale(inf));
}

TEST(LossScaler, StaticAndNoneKeepTheirScale) {
  LossScaling st;
  st.mode = LossScaleMode::kStatic;
  st.init_scale = 1024;
  LossScaler a(st);
  a.update(true);
  a.update(false);
  EXPECT_EQ(a.scale(), 1024.0f);
  EXPECT_TRUE(a.checks_gradients());
  LossScaler none{LossScaling{}};
  EXPECT_EQ(none.scale(), 1.0f);
  EXPECT_FALSE(none.checks_gradients());
}

}  // namespace
}  // namespace precsim

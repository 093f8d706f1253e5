// Optimizers against closed forms derived by hand (constant gradient), and the LR schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/optimizer_json.h"

namespace precsim {
namespace {

TEST(Optimizer, AdamWConstantGradientHasClosedForm) {
  // With a constant g, m_t = g (1 - b1^t) and v_t = g^2 (1 - b2^t), so the bias-corrected update
  // is -lr g / (|g| + eps) - lr wd w at every step.
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.lr = 1e-2;
  c.weight_decay = 0.1;
  std::vector<double> w = {0.5, -2.0, 3.0}, g = {0.25, -1e-3, 4.0}, m(3, 0), v(3, 0), next(3);
  for (int t = 1; t <= 50; ++t) {
    optimizer_update(next.data(), m.data(), v.data(), w.data(), g.data(), 3, c, c.lr, t);
    for (int i = 0; i < 3; ++i) {
      const double expect = -c.lr * c.weight_decay * w[i] - c.lr * g[i] / (std::fabs(g[i]) + c.eps);
      EXPECT_NEAR(next[i] - w[i], expect, 1e-12 * std::fabs(expect)) << "t=" << t << " i=" << i;
      EXPECT_NEAR(m[i], g[i] * (1 - std::pow(c.beta1, t)), 1e-14);
      w[i] = next[i];
    }
  }
}

TEST(Optimizer, SgdMomentumConstantGradientIsGeometric) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.lr = 0.1;
  c.momentum = 0.9;
  std::vector<double> w = {1.0}, g = {2.0}, m(1, 0), v(1, 0), next(1);
  for (int t = 1; t <= 20; ++t) {
    optimizer_update(next.data(), m.data(), v.data(), w.data(), g.data(), 1, c, c.lr, t);
    const double buf = 2.0 * (1 - std::pow(0.9, t)) / (1 - 0.9);
    EXPECT_NEAR(next[0] - w[0], -0.1 * buf, 1e-12) << t;
  }
}

TEST(Optimizer, FloatOpmathAgreesWithDoubleToFp32Rounding) {
  OptimizerConfig c;
  std::vector<float> wf = {0.3f}, gf = {0.01f}, mf(1), vf(1), nf(1);
  std::vector<double> wd = {0.3f}, gd = {0.01f}, md(1), vd(1), nd(1);
  for (int t = 1; t <= 10; ++t) {
    optimizer_update(nf.data(), mf.data(), vf.data(), wf.data(), gf.data(), 1, c, c.lr, t);
    optimizer_update(nd.data(), md.data(), vd.data(), wd.data(), gd.data(), 1, c, c.lr, t);
    // The FP32 step's only departure from FP64 is rounding: within one FP32 ulp of 0.3 (2^-25).
    EXPECT_NEAR(double(nf[0]), nd[0], std::ldexp(1.0, -25)) << t;
  }
}

TEST(Optimizer, WarmupAndCosineSchedule) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.warmup_steps = 10;
  c.cosine = true;
  c.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10, 110), 1.0);
  EXPECT_NEAR(learning_rate(c, 109, 110), 0.1, 1e-15);
  // Halfway through the decay: lo + (hi - lo) / 2.
  const int64_t mid = 10 + (110 - 1 - 10) / 2;
  EXPECT_NEAR(learning_rate(c, mid, 110), 0.1 + 0.45 * (1 + std::cos(std::numbers::pi * double(mid - 10) / 99)), 1e-15);
}

TEST(Optimizer, ConfigRejectsUnknownKeysAndValues) {
  EXPECT_THROW(optimizer_config_from_json({{"lrr", 1}}), std::invalid_argument);
  EXPECT_THROW(optimizer_config_from_json({{"kind", "adam"}}), std::invalid_argument);
  EXPECT_THROW(optimizer_config_from_json({{"lr", "fast"}}), std::invalid_argument);
  EXPECT_THROW(optimizer_config_from_json({{"warmup_steps", 1.5}}), std::invalid_argument);
  try {
    optimizer_config_from_json({{"lrr", 1}});
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("valid keys here: beta1, beta2, clip_norm, cosine, eps, kind, lr"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace precsim

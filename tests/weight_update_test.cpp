// The end of a training step on hand-made gradients: clip_norm as torch.nn.utils.clip_grad_norm_
// defines it (one global L2 norm, coefficient max_norm / (norm + 1e-6) clamped to 1, applied in the
// gradients' type), and FP8 optimizer states with and without their per-tensor amax scale, against
// expectations computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {
namespace {

OptimizerConfig sgd(double momentum, double clip_norm = 0.0) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.lr = 0.5;
  c.momentum = momentum;
  c.clip_norm = clip_norm;
  return c;
}

// Gradients of two "tensors" laid end to end: clip_grad_norm_ takes one norm over all of them.
std::vector<float> two_tensor_gradients() {
  std::vector<float> g;
  for (int i = 0; i < 24; ++i) g.push_back(0.25f * float(i % 7) - 0.6f);
  for (int i = 0; i < 40; ++i) g.push_back(0.01f * float(i) - 0.3f);
  return g;
}

TEST(ClipNorm, ScalesByMaxNormOverTheGlobalNormPlusEpsilonOnlyAboveTheBound) {
  const std::vector<float> g0 = two_tensor_gradients();
  double sq = 0;
  for (float v : g0) sq += double(v) * double(v);
  const double norm = std::sqrt(sq);  // about 2.9
  for (const double max_norm : {0.5, 1.0, 2.0, 100.0}) {
    std::vector<float> g = g0;
    RunState<float> s = initial_state<float>(std::vector<double>(g.size(), 1.0), nullptr);
    StepStats st;
    finish_step<float>(s, g, nullptr, sgd(0.0, max_norm), 0.5, 1, 0, st, nullptr);
    EXPECT_DOUBLE_EQ(st.grad_norm, norm);  // reported before clipping
    const float coef = static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
    double clipped_sq = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_EQ(g[i], max_norm < norm ? g0[i] * coef : g0[i]) << "max_norm " << max_norm << " i=" << i;
      clipped_sq += double(g[i]) * double(g[i]);
      // Plain SGD applies the clipped gradient: w = 1 - lr g.
      ASSERT_FLOAT_EQ(s.weights[i], 1.0f - 0.5f * g[i]) << "max_norm " << max_norm << " i=" << i;
    }
    EXPECT_NEAR(std::sqrt(clipped_sq), std::min(norm, max_norm), 1e-6 * max_norm);
  }
}

TEST(ClipNorm, OffByDefault) {
  std::vector<float> g = two_tensor_gradients();
  const std::vector<float> g0 = g;
  RunState<float> s = initial_state<float>(std::vector<double>(g.size(), 1.0), nullptr);
  StepStats st;
  finish_step<float>(s, g, nullptr, sgd(0.0), 0.5, 1, 0, st, nullptr);
  EXPECT_EQ(g, g0);
}

TensorFormat fmt(const char* name) { return TensorFormat{name, Rounding::kNearestEven, format_by_name(name)}; }

// x rounded to nearest-even with 4 significand bits (E4M3's normal numbers; the tests keep x there).
double round_e4m3_normal(double x) {
  int e = 0;
  std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(x, 4 - e)), e - 4);
}

// Gradients near 1e-4: below half of E4M3's smallest subnormal (2^-10), so an unscaled E4M3
// momentum is all zeros; the per-tensor amax scale 448 / amax lifts them to [224, 448].
std::vector<float> small_gradients() {
  std::vector<float> g(64);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 1e-4f * (1.0f + float(i) / 64.0f) * (i % 3 ? 1.0f : -1.0f);
  return g;
}

TEST(Fp8OptimizerState, UnscaledE4m3MomentumFlushesSmallGradientsAndTheAmaxScaleKeepsThem) {
  const std::vector<float> g = small_gradients();
  Recipe r = recipe_preset("fp32");
  r.optimizer_state = fmt("e4m3");
  for (const bool scaled : {false, true}) {
    r.optimizer_state_scaled = scaled;
    RunState<float> s = initial_state<float>(std::vector<double>(g.size(), 0.0), &r);
    StepStats st;
    // SGD's first step copies the gradient into the momentum (PyTorch), so the state holds g
    // rounded into E4M3.
    apply_update<float>(s, std::span<const float>(g), &r, sgd(0.9), 0.5, 1, 0, st);
    double amax = 0;
    for (float v : g) amax = std::max(amax, double(std::fabs(v)));
    const float scale = static_cast<float>(448.0 / amax);
    for (size_t i = 0; i < g.size(); ++i) {
      const float want = scaled ? static_cast<float>(round_e4m3_normal(g[i] * scale)) / scale : 0.0f;
      ASSERT_EQ(s.m[i], want) << (scaled ? "scaled" : "unscaled") << " i=" << i;
    }
    const auto& role = st.roles[static_cast<size_t>(Role::kOptimizerState)];
    EXPECT_EQ(role.underflow_to_zero, scaled ? 0u : g.size()) << scaled;
  }
}

TEST(Fp8OptimizerState, AdamWRoundsBothMomentsAndTheScaleKeepsTheSecondMoment) {
  // v = (1 - b2) g^2 is about 1e-11: zero in E4M3 unless scaled by its own amax.
  const std::vector<float> g = small_gradients();
  Recipe r = recipe_preset("fp32");
  r.optimizer_state = fmt("e4m3");
  OptimizerConfig adamw;
  adamw.lr = 1e-3;
  for (const bool scaled : {false, true}) {
    r.optimizer_state_scaled = scaled;
    RunState<float> s = initial_state<float>(std::vector<double>(g.size(), 0.0), &r);
    StepStats st;
    apply_update<float>(s, std::span<const float>(g), &r, adamw, adamw.lr, 1, 0, st);
    size_t m_zero = 0, v_zero = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      m_zero += s.m[i] == 0;
      v_zero += s.v[i] == 0;
      if (scaled) EXPECT_NEAR(s.v[i], 0.001 * double(g[i]) * double(g[i]), 0.0625 * 0.001 * double(g[i]) * double(g[i]));
    }
    EXPECT_EQ(m_zero, scaled ? 0u : g.size()) << scaled;
    EXPECT_EQ(v_zero, scaled ? 0u : g.size()) << scaled;
  }
}

}  // namespace
}  // namespace precsim

// Gradients of every layer, and of whole MLPs, against central finite differences in FP64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "precsim/sim/model/layers.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/train/mlp_trainer.h"
#include "support/finite_difference.h"

namespace precsim {
namespace {

using test_support::fd_check;

std::vector<double> randn(size_t n, uint64_t stream) {
  std::vector<double> v(n);
  fill_normal(std::span<double>(v), 7, stream);
  return v;
}

TEST(Layers, LayerNormBackwardMatchesFiniteDifferences) {
  const int b = 3, c = 5;
  std::vector<double> x = randn(b * c, 1), w = randn(c, 2), bias = randn(c, 3), dy = randn(b * c, 4);
  std::vector<double> out(b * c), mean(b), rstd(b);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), b, c);
    double s = 0;
    for (int i = 0; i < b * c; ++i) s += out[i] * dy[i];
    return s;
  };
  loss();
  std::vector<double> dx(b * c, 0), dw(c, 0), db(c, 0);
  layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), b, c);
  EXPECT_LT(fd_check(x, dx, loss), 1e-6);
  EXPECT_LT(fd_check(w, dw, loss), 1e-6);
  EXPECT_LT(fd_check(bias, db, loss), 1e-6);
}

TEST(Layers, BatchNormBackwardMatchesFiniteDifferencesAndNormalisesOverTheBatch) {
  const int b = 4, c = 3;
  std::vector<double> x = randn(b * c, 11), w = randn(c, 12), bias = randn(c, 13), dy = randn(b * c, 14);
  std::vector<double> out(b * c), mean(c), var(c), rstd(c);
  auto loss = [&] {
    batchnorm_forward(out.data(), mean.data(), var.data(), rstd.data(), x.data(), w.data(), bias.data(), b, c);
    double s = 0;
    for (int i = 0; i < b * c; ++i) s += out[i] * dy[i];
    return s;
  };
  loss();
  // Each channel of (out - bias) / weight has mean 0 and biased variance var / (var + eps).
  for (int i = 0; i < c; ++i) {
    double m = 0, v = 0;
    for (int r = 0; r < b; ++r) m += (out[r * c + i] - bias[i]) / w[i] / b;
    for (int r = 0; r < b; ++r) v += std::pow((out[r * c + i] - bias[i]) / w[i] - m, 2) / b;
    EXPECT_NEAR(m, 0.0, 1e-14);
    EXPECT_NEAR(v, var[i] / (var[i] + 1e-5), 1e-13);
  }
  std::vector<double> dx(b * c, 0), dw(c, 0), db(c, 0);
  batchnorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), b, c);
  EXPECT_LT(fd_check(x, dx, loss), 1e-6);
  EXPECT_LT(fd_check(w, dw, loss), 1e-6);
  EXPECT_LT(fd_check(bias, db, loss), 1e-6);
  // Evaluation with the batch's own statistics reproduces the training-mode output.
  loss();  // fd_check left the outputs of its last perturbed call
  std::vector<double> inf(b * c);
  batchnorm_inference(inf.data(), x.data(), w.data(), bias.data(), mean.data(), var.data(), b, c);
  for (int i = 0; i < b * c; ++i) EXPECT_NEAR(inf[i], out[i], 1e-14);
}

TEST(Layers, GeluSoftmaxXentAndMseBackwardMatchFiniteDifferences) {
  const int b = 4, v = 6;
  std::vector<double> z = randn(b * v, 5), dy = randn(b * v, 6), t = randn(b * v, 7);
  std::vector<int32_t> y = {0, 5, 2, 3};
  std::vector<double> out(b * v), probs(b * v), losses(b);
  auto gelu_loss = [&] {
    gelu_forward(out.data(), z.data(), out.size());
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += out[i] * dy[i];
    return s;
  };
  std::vector<double> dz(b * v, 0);
  gelu_backward(dz.data(), z.data(), dy.data(), dz.size());
  EXPECT_LT(fd_check(z, dz, gelu_loss), 1e-6);
  auto xent = [&] {
    softmax_xent_forward(losses.data(), probs.data(), z.data(), y.data(), b, v);
    double s = 0;
    for (double l : losses) s += l;
    return s / b;
  };
  xent();
  std::fill(dz.begin(), dz.end(), 0.0);
  softmax_xent_backward(dz.data(), probs.data(), y.data(), 1.0 / b, b, v);
  EXPECT_LT(fd_check(z, dz, xent), 1e-6);
  auto mse = [&] {
    mse_forward(losses.data(), z.data(), t.data(), b, v);
    double s = 0;
    for (double l : losses) s += l;
    return s / b;
  };
  std::fill(dz.begin(), dz.end(), 0.0);
  mse_backward(dz.data(), z.data(), t.data(), 1.0 / b, b, v);
  EXPECT_LT(fd_check(z, dz, mse), 1e-6);
}

// The whole MLP (linear through gemm_f64, LayerNorm, GELU, residual, both losses) through the
// FP64 reference trainer: its gradient against finite differences of its own loss.
void check_mlp(const MlpConfig& mc, Task task) {
  const int rows = 5, features = 4, outputs = 3;
  const MlpLayout layout = make_mlp_layout(mc, features, outputs);
  std::vector<double> params = init_mlp(layout, mc, 3);
  for (size_t i = 0; i < params.size(); ++i) params[i] += 0.1 * standard_normal(11, 1, i);  // non-trivial LN/bias
  std::vector<double> x = randn(rows * features, 8), t = randn(rows * outputs, 9);
  std::vector<int32_t> y = {0, 1, 2, 1, 0};
  BatchView b{x.data(), task == Task::kClassification ? y.data() : nullptr,
              task == Task::kRegression ? t.data() : nullptr, rows};
  OptimizerConfig opt;
  Trainer<double> tr(layout, nullptr, opt, task, 1, 10);
  auto loss = [&] {
    RunState<double> s = tr.init_state(params);
    return tr.step(s, b, 0).loss;
  };
  RunState<double> s = tr.init_state(params);
  std::vector<double> g;
  tr.step(s, b, 0, &g);
  EXPECT_LT(fd_check(params, g, loss), 1e-5);
}

// The forward's kept tanh gives the backward the bits of computing it again (the transformer keeps
// it; the MLP recomputes), in float and in double, for inputs across GELU's whole range.
template <class T>
void check_gelu_kept_tanh() {
  std::vector<T> z, dy;
  for (int i = 0; i < 4001; ++i) {
    z.push_back(T(std::ldexp(double(i % 97) - 48.3, i % 23 - 14)));
    dy.push_back(T(std::sin(0.37 * i)));
  }
  std::vector<T> out(z.size()), kept(z.size()), out2(z.size());
  gelu_forward(out.data(), z.data(), z.size(), kept.data());
  gelu_forward(out2.data(), z.data(), z.size());
  std::vector<T> with(z.size(), T(0.25)), without(z.size(), T(0.25));  // the backward accumulates
  gelu_backward(with.data(), z.data(), dy.data(), z.size(), kept.data());
  gelu_backward(without.data(), z.data(), dy.data(), z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    ASSERT_EQ(out[i], out2[i]) << i;
    const T arg = T(0.7978845608028654) * (z[i] + T(0.044715) * z[i] * z[i] * z[i]);  // sqrt(2/pi) in T
    ASSERT_EQ(kept[i], T(std::tanh(double(arg)))) << i;
    ASSERT_EQ(with[i], without[i]) << "z " << z[i];
  }
}

TEST(Layers, GeluBackwardFromTheKeptTanhIsBitForBit) {
  check_gelu_kept_tanh<float>();
  check_gelu_kept_tanh<double>();
}

TEST(Layers, MlpGradientMatchesFiniteDifferences) {
  MlpConfig gelu_ln;
  gelu_ln.hidden = {6, 6};
  gelu_ln.activation = "gelu";
  gelu_ln.layernorm = true;
  gelu_ln.residual = true;
  check_mlp(gelu_ln, Task::kClassification);
  check_mlp(gelu_ln, Task::kRegression);
  MlpConfig relu;
  relu.hidden = {7};
  check_mlp(relu, Task::kClassification);
  MlpConfig bn;
  bn.hidden = {6, 6};
  bn.activation = "gelu";
  bn.batchnorm = true;
  check_mlp(bn, Task::kClassification);
  check_mlp(bn, Task::kRegression);
}

TEST(Layers, ResidualAndBiasBackwardAccumulate) {
  std::vector<double> da = {1, 1}, db = {2, 2}, dout = {0.5, -0.5};
  residual_backward(da.data(), db.data(), dout.data(), 2);
  EXPECT_EQ(da, (std::vector<double>{1.5, 0.5}));
  EXPECT_EQ(db, (std::vector<double>{2.5, 1.5}));
  std::vector<double> dbias = {1, 0}, d = {1, 2, 3, 4};  // (2,2)
  bias_backward(dbias.data(), d.data(), 2, 2);
  EXPECT_EQ(dbias, (std::vector<double>{5, 6}));
}

}  // namespace
}  // namespace precsim

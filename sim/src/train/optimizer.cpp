#include "precsim/sim/train/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/train/optimizer_json.h"

namespace precsim {

double learning_rate(const OptimizerConfig& c, int64_t step, int64_t total_steps) {
  if (c.warmup_steps > 0 && step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  if (!c.cosine) return c.lr;
  const double span = double(std::max<int64_t>(1, total_steps - 1 - c.warmup_steps));
  const double progress = std::min(1.0, double(step - c.warmup_steps) / span);
  const double lo = c.lr * c.min_lr_ratio;
  return lo + 0.5 * (c.lr - lo) * (1.0 + std::cos(std::numbers::pi * progress));
}

namespace {

// torch's lerp(self, end, weight): fma(weight, end - self, self) for weight < 0.5, else
// fma(weight - 1, end - self, end) (ATen's lerp_vec).
template <class T>
[[gnu::always_inline]] inline T torch_lerp(T self, T end, T weight) {
  return weight < T(0.5) ? std::fma(weight, end - self, self) : std::fma(weight - T(1), end - self, end);
}

// The per-element operations in T, converted from PyTorch's Python floats once per call.
template <class T>
struct AdamwConstants {
  bool decoupled;  // weight_decay != 0
  T decay, w1, b2, one_b2, neg_step, bc2s, eps;
};

template <class T>
struct SgdConstants {
  bool first, decay;  // the momentum buffer starts as the gradient; weight_decay != 0
  T mom, wd, neg_lr;
};

template <class T>
[[gnu::always_inline]] inline void adamw_loop(T* w_new, T* m, T* v, const T* w, const T* g, size_t n,
                                              AdamwConstants<T> k) {
  for (size_t i = 0; i < n; ++i) {
    const T p = k.decoupled ? w[i] * k.decay : w[i];
    m[i] = torch_lerp(m[i], g[i], k.w1);
    v[i] = std::fma(k.one_b2 * g[i], g[i], v[i] * k.b2);
    const T denom = std::sqrt(v[i]) / k.bc2s + k.eps;
    w_new[i] = p + (k.neg_step * m[i]) / denom;
  }
}

template <class T>
[[gnu::always_inline]] inline void sgd_loop(T* w_new, T* m, const T* w, const T* g, size_t n, SgdConstants<T> k) {
  for (size_t i = 0; i < n; ++i) {
    const T gi = k.decay ? std::fma(w[i], k.wd, g[i]) : g[i];
    m[i] = k.first ? gi : m[i] * k.mom + gi;
    w_new[i] = std::fma(m[i], k.neg_lr, w[i]);
  }
}

// The loops compiled for x86-64-v4 (AVX-512), v3 (AVX2 with FMA) and the baseline, chosen at run
// time (GCC function multiversioning). Every lane does the scalar loop's operations: std::fma is
// one fused instruction where the target has FMA and libm's exact fma where not, square root and
// division are correctly rounded at any width (the file is built with -fno-math-errno so that the
// square root vectorises; v >= 0 here), and -ffp-contract=off keeps other products unfused. So the
// bits are the same on every target (tests/optimizer_test.cpp, tests/python/test_torch_optim.py).
#define PRECSIM_OPTIMIZER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
PRECSIM_OPTIMIZER_CLONES void adamw_f32(float* w_new, float* m, float* v, const float* w, const float* g, size_t n,
                                        AdamwConstants<float> k) {
  adamw_loop(w_new, m, v, w, g, n, k);
}
PRECSIM_OPTIMIZER_CLONES void adamw_f64(double* w_new, double* m, double* v, const double* w, const double* g, size_t n,
                                        AdamwConstants<double> k) {
  adamw_loop(w_new, m, v, w, g, n, k);
}
PRECSIM_OPTIMIZER_CLONES void sgd_f32(float* w_new, float* m, const float* w, const float* g, size_t n,
                                      SgdConstants<float> k) {
  sgd_loop(w_new, m, w, g, n, k);
}
PRECSIM_OPTIMIZER_CLONES void sgd_f64(double* w_new, double* m, const double* w, const double* g, size_t n,
                                      SgdConstants<double> k) {
  sgd_loop(w_new, m, w, g, n, k);
}
#undef PRECSIM_OPTIMIZER_CLONES

}  // namespace

template <class T>
void optimizer_update(T* w_new, T* m, T* v, const T* w, const T* g, size_t n, const OptimizerConfig& c, double lr,
                      int64_t t) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  if (c.kind == OptimizerKind::kSgd) {
    // grad.add(param, alpha=wd); buf.mul_(momentum).add_(grad) (buf = grad at the first step);
    // param.add_(buf, alpha=-lr): each add-with-alpha is one fused multiply-add.
    const SgdConstants<T> k{t == 1 || T(c.momentum) == T(0), T(c.weight_decay) != T(0), T(c.momentum), T(c.weight_decay),
                            T(-lr)};
    if constexpr (kFloat) sgd_f32(w_new, m, w, g, n, k);
    else sgd_f64(w_new, m, w, g, n, k);
    return;
  }
  // AdamW (_single_tensor_adamw): param.mul_(1 - lr wd); exp_avg.lerp_(grad, 1 - beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) (fused: fma(value g, g, v));
  // denom = sqrt(v) / sqrt(bc2) + eps; param.addcdiv_(m, denom, value=-lr/bc1) = p + (value m) / denom.
  // Scalars are Python floats (double) converted to T at each operation.
  const double bc1 = 1.0 - std::pow(c.beta1, double(t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, double(t)));
  const AdamwConstants<T> k{c.weight_decay != 0, T(1.0 - lr * c.weight_decay), T(1.0 - c.beta1), T(c.beta2),
                            T(1.0 - c.beta2), T(-(lr / bc1)), T(bc2_sqrt), T(c.eps)};
  if constexpr (kFloat) adamw_f32(w_new, m, v, w, g, n, k);
  else adamw_f64(w_new, m, v, w, g, n, k);
}

template void optimizer_update<float>(float*, float*, float*, const float*, const float*, size_t,
                                      const OptimizerConfig&, double, int64_t);
template void optimizer_update<double>(double*, double*, double*, const double*, const double*, size_t,
                                       const OptimizerConfig&, double, int64_t);

std::string_view to_string(OptimizerKind k) { return k == OptimizerKind::kSgd ? "sgd" : "adamw"; }

void to_json(nlohmann::json& j, OptimizerKind k) { j = to_string(k); }
void from_json(const nlohmann::json& j, OptimizerKind& k) {
  const std::string s = j.get<std::string>();
  if (s == "sgd") k = OptimizerKind::kSgd;
  else if (s == "adamw") k = OptimizerKind::kAdamW;
  else throw std::invalid_argument(fmt::format("unknown optimizer.kind '{}'; allowed: sgd, adamw", s));
}

// One list of the keys serves both directions; the names are the config keys.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OptimizerConfig, kind, lr, momentum, beta1, beta2, eps, weight_decay, clip_norm,
                                   warmup_steps, cosine, min_lr_ratio)

nlohmann::json optimizer_config_to_json(const OptimizerConfig& c) { return c; }

OptimizerConfig optimizer_config_from_json(const nlohmann::json& j) {
  const auto c = merge_config(optimizer_config_to_json(OptimizerConfig{}), j, "optimizer").get<OptimizerConfig>();
  if (!(c.lr > 0)) throw std::invalid_argument(fmt::format("optimizer.lr {} must be > 0", c.lr));
  if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1))
    throw std::invalid_argument("optimizer.beta1 and optimizer.beta2 must be in [0, 1)");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw std::invalid_argument("optimizer.momentum must be in [0, 1)");
  if (!(c.clip_norm >= 0)) throw std::invalid_argument("optimizer.clip_norm must be >= 0 (0: off)");
  if (c.warmup_steps < 0) throw std::invalid_argument("optimizer.warmup_steps must be >= 0");
  return c;
}

}  // namespace precsim

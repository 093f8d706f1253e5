#include "precsim/sim/train/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/strict_json.h"

namespace precsim {

double learning_rate(const OptimizerConfig& c, int64_t step, int64_t total_steps) {
  if (c.warmup_steps > 0 && step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  if (!c.cosine) return c.lr;
  const double span = double(std::max<int64_t>(1, total_steps - 1 - c.warmup_steps));
  const double progress = std::min(1.0, double(step - c.warmup_steps) / span);
  const double lo = c.lr * c.min_lr_ratio;
  return lo + 0.5 * (c.lr - lo) * (1.0 + std::cos(std::numbers::pi * progress));
}

// torch's lerp(self, end, weight): fma(weight, end - self, self) for weight < 0.5, else
// fma(weight - 1, end - self, end) (ATen's lerp_vec).
template <class T>
T torch_lerp(T self, T end, T weight) {
  return weight < T(0.5) ? std::fma(weight, end - self, self) : std::fma(weight - T(1), end - self, end);
}

template <class T>
void optimizer_update(T* w_new, T* m, T* v, const T* w, const T* g, size_t n, const OptimizerConfig& c, double lr,
                      int64_t t) {
  if (c.kind == "sgd") {
    // grad.add(param, alpha=wd); buf.mul_(momentum).add_(grad) (buf = grad at the first step);
    // param.add_(buf, alpha=-lr): each add-with-alpha is one fused multiply-add.
    const T mom = T(c.momentum), wd = T(c.weight_decay), neg_lr = T(-lr);
    for (size_t i = 0; i < n; ++i) {
      const T gi = wd != T(0) ? std::fma(w[i], wd, g[i]) : g[i];
      m[i] = (t == 1 || mom == T(0)) ? gi : m[i] * mom + gi;
      w_new[i] = std::fma(m[i], neg_lr, w[i]);
    }
    return;
  }
  // AdamW (_single_tensor_adamw): param.mul_(1 - lr wd); exp_avg.lerp_(grad, 1 - beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) (fused: fma(value g, g, v));
  // denom = sqrt(v) / sqrt(bc2) + eps; param.addcdiv_(m, denom, value=-lr/bc1) = p + (value m) / denom.
  // Scalars are Python floats (double) converted to T at each operation.
  const double bc1 = 1.0 - std::pow(c.beta1, double(t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, double(t)));
  const T decay = T(1.0 - lr * c.weight_decay), w1 = T(1.0 - c.beta1), b2 = T(c.beta2), one_b2 = T(1.0 - c.beta2);
  const T neg_step = T(-(lr / bc1)), bc2s = T(bc2_sqrt), eps = T(c.eps);
  for (size_t i = 0; i < n; ++i) {
    const T p = c.weight_decay != 0 ? w[i] * decay : w[i];
    m[i] = torch_lerp(m[i], g[i], w1);
    v[i] = std::fma(one_b2 * g[i], g[i], v[i] * b2);
    const T denom = std::sqrt(v[i]) / bc2s + eps;
    w_new[i] = p + (neg_step * m[i]) / denom;
  }
}

template void optimizer_update<float>(float*, float*, float*, const float*, const float*, size_t,
                                      const OptimizerConfig&, double, int64_t);
template void optimizer_update<double>(double*, double*, double*, const double*, const double*, size_t,
                                       const OptimizerConfig&, double, int64_t);

// One list of the keys serves both directions; the names are the config keys.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OptimizerConfig, kind, lr, momentum, beta1, beta2, eps, weight_decay, clip_norm,
                                   warmup_steps, cosine, min_lr_ratio)

nlohmann::json optimizer_config_to_json(const OptimizerConfig& c) { return c; }

OptimizerConfig optimizer_config_from_json(const nlohmann::json& j) {
  const auto c = merge_config(optimizer_config_to_json(OptimizerConfig{}), j, "optimizer").get<OptimizerConfig>();
  if (c.kind != "sgd" && c.kind != "adamw")
    throw std::invalid_argument(fmt::format("unknown optimizer.kind '{}'; allowed: sgd, adamw", c.kind));
  if (!(c.lr > 0)) throw std::invalid_argument(fmt::format("optimizer.lr {} must be > 0", c.lr));
  if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1))
    throw std::invalid_argument("optimizer.beta1 and optimizer.beta2 must be in [0, 1)");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw std::invalid_argument("optimizer.momentum must be in [0, 1)");
  if (!(c.clip_norm >= 0)) throw std::invalid_argument("optimizer.clip_norm must be >= 0 (0: off)");
  if (c.warmup_steps < 0) throw std::invalid_argument("optimizer.warmup_steps must be >= 0");
  return c;
}

}  // namespace precsim

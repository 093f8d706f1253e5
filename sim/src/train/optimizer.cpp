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

template <class T>
void optimizer_delta(T* delta, T* m, T* v, const T* w, const T* g, size_t n, const OptimizerConfig& c, double lr,
                     int64_t t) {
  if (c.kind == "sgd") {
    const T mom = T(c.momentum), wd = T(c.weight_decay), step = T(lr);
    for (size_t i = 0; i < n; ++i) {
      const T gi = wd != T(0) ? g[i] + wd * w[i] : g[i];
      m[i] = (t == 1 || mom == T(0)) ? gi : mom * m[i] + gi;
      delta[i] = -step * m[i];
    }
    return;
  }
  // PyTorch AdamW (single-tensor path): decay, lerp of the first moment, second moment, then
  // param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps); scalars in double, as Python floats.
  const double bc1 = 1.0 - std::pow(c.beta1, double(t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, double(t)));
  const T decay = T(lr * c.weight_decay), b1 = T(1.0 - c.beta1), b2 = T(c.beta2), one_b2 = T(1.0 - c.beta2);
  const T step_size = T(lr / bc1), bc2s = T(bc2_sqrt), eps = T(c.eps);
  for (size_t i = 0; i < n; ++i) {
    m[i] = m[i] + b1 * (g[i] - m[i]);
    v[i] = v[i] * b2 + one_b2 * g[i] * g[i];
    const T denom = static_cast<T>(std::sqrt(static_cast<double>(v[i]))) / bc2s + eps;
    delta[i] = -(w[i] * decay) - step_size * (m[i] / denom);
  }
}

template void optimizer_delta<float>(float*, float*, float*, const float*, const float*, size_t,
                                     const OptimizerConfig&, double, int64_t);
template void optimizer_delta<double>(double*, double*, double*, const double*, const double*, size_t,
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

#include "precsim/sim/train/loss_scaler.h"

#include <cmath>

namespace precsim {

LossScaler::LossScaler(const LossScaling& cfg)
    : cfg_(cfg), scale_(cfg.mode == LossScaleMode::kNone ? 1.0f : static_cast<float>(cfg.init_scale)) {}

float LossScaler::inv_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale_)); }

bool LossScaler::unscale(std::span<float> grads) const {
  bool found_inf = false;
  for (float g : grads) found_inf |= !std::isfinite(g);
  const float inv = inv_scale();
  if (inv != 1.0f)
    for (float& g : grads) g *= inv;
  return found_inf;
}

void LossScaler::update(bool found_inf) {
  if (cfg_.mode != LossScaleMode::kDynamic) return;
  if (found_inf) {
    scale_ *= static_cast<float>(cfg_.backoff_factor);
    tracker_ = 0;
    return;
  }
  const int t = tracker_ + 1;
  if (t == cfg_.growth_interval) {
    const float grown = scale_ * static_cast<float>(cfg_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    tracker_ = 0;
  } else {
    tracker_ = t;
  }
}

}  // namespace precsim

// Loss scaling with PyTorch GradScaler's semantics (docs/reference/sources.md §4.3): the scale is an FP32
// number; unscaling multiplies by the FP32 reciprocal computed in double; any inf/NaN gradient skips
// the step and multiplies the scale by the backoff factor; growth_interval clean steps in a row
// multiply it by the growth factor, accepted only if the result is finite.
#pragma once

#include <cstdint>
#include <span>

#include "precsim/sim/train/recipe.h"

namespace precsim {

class LossScaler {
 public:
  explicit LossScaler(const LossScaling& cfg);

  // The factor the loss is multiplied by (1 when mode is none).
  float scale() const { return scale_; }
  // scale.double().reciprocal().float(), as GradScaler.unscale_ computes it.
  float inv_scale() const;
  int growth_tracker() const { return tracker_; }
  bool checks_gradients() const { return cfg_.mode != LossScaleMode::kNone; }

  // Multiplies every element by inv_scale (skipped when it is 1) and returns whether any element
  // was not finite before unscaling (found_inf). Gradients are unscaled even when found_inf.
  bool unscale(std::span<float> grads) const;
  // After a step: found_inf true skips the step and backs off (dynamic mode); false counts towards
  // growth. Static mode keeps the scale; none does nothing.
  void update(bool found_inf);

 private:
  LossScaling cfg_;
  float scale_;
  int tracker_ = 0;
};

}  // namespace precsim

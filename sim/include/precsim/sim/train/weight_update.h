// The optimizer update of the weights shared by every trainer (optimizer states, master copy, stored
// weights with nearest, stochastic or Kahan-compensated rounding), the weight cast and the end of
// a step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "precsim/formats/quant_options.h"
#include "precsim/sim/parallel/split.h"
#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/rounding.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// out = the weights a step computes with: `weights` rounded into the recipe's weights format
// (tensor sr_keys::kWeightCast), except the ranges `autocast_fp32`, which autocast keeps in FP32
// (the normalisations' parameters) when the recipe says autocast. No recipe: a copy.
template <class T>
void cast_weights(std::vector<T>& out, const std::vector<T>& weights, const Recipe* r,
                  std::span<const ParamRange> autocast_fp32, uint64_t seed, uint64_t step, StepStats* st);

// One optimizer step of s with the unscaled, clipped gradient: optimizer states rounded into the
// recipe's state format (per-tensor amax-scaled when it says so), then the master copy, or the
// stored weights directly with the recipe's update rounding. r == nullptr: exact in T. Counts
// intended and lost updates into st.
template <class T>
void apply_update(RunState<T>& s, std::span<const T> grads, const Recipe* r, const OptimizerConfig& opt, double lr,
                  uint64_t seed, uint64_t step, StepStats& st);

// A run's state at the start: the weights (cast to the stored format, rounding to nearest, when the
// recipe keeps no master copy), zero optimizer states and compensation, the recipe's loss scaler.
template <class T>
RunState<T> initial_state(const std::vector<double>& params, const Recipe* r);

// The end of a step after the backward pass: unscale the gradient (FP32; FP64 only checks it),
// found_inf and the gradient norm, the optional copy for the caller, a skipped step on inf/NaN when
// the loss scaler checks, norm clipping (clip_grad_norm_), apply_update, the scaler's update.
template <class T>
void finish_step(RunState<T>& s, std::vector<T>& grads, const Recipe* r, const OptimizerConfig& opt, double lr,
                 uint64_t seed, uint64_t step, StepStats& st, std::vector<T>* grads_out);

}  // namespace precsim

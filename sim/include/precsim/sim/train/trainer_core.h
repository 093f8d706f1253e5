// What every trainer holds whatever its model: the recipe and optimizer, the split of a step
// (GradientSplit), the numerics its model runs with (StepNumerics), the cast weights and the
// gradient; and the frame of a step and of an evaluation around the model's own passes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/step_numerics.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {

template <class T>
struct TrainerCore {
  const Recipe* recipe;
  OptimizerConfig opt;
  uint64_t seed;
  int64_t total_steps;
  GradientSplit<T> split;
  std::vector<ParamRange> norm_params;  // kept in FP32 under autocast
  StepNumerics<T> nx;
  std::vector<T> cast_w, grads;

  // tensors: the parameter tensors in parameter order (the DDP bucket units). Throws
  // std::invalid_argument naming a bad accumulation model or operand scheme of the recipe.
  TrainerCore(const Recipe* r, const OptimizerConfig& o, uint64_t sr_seed, int64_t total, std::vector<ParamRange> tensors,
              size_t param_count, std::vector<ParamRange> norm, const ModelKeys& keys, int layers)
      : recipe(r), opt(o), seed(sr_seed), total_steps(total), split(std::move(tensors), param_count, r == nullptr),
        norm_params(std::move(norm)), nx(r, sr_seed, keys, layers) {
    nx.parallel = &split.parallel();
  }
  TrainerCore(const TrainerCore&) = delete;
  // The recipe's per-part recipes over a model of `layers` layers (MLP layers, transformer
  // blocks); ranges: each part slot's parameter tensors. Throws std::invalid_argument for a part
  // the model does not have.
  void set_parts(bool transformer, int layers, std::vector<std::vector<ParamRange>> ranges) {
    if (!recipe) return;
    PartRecipes p(*recipe, transformer, layers);
    if (!p.active()) return;
    p.ranges = std::move(ranges);
    nx.set_parts(std::move(p));
  }
  // After cast_weights: each part whose weights format differs from the recipe's re-cast from the
  // stored weights into its own (its stochastic-rounding id sr_keys::part_weight_cast(slot)).
  void cast_parts(const std::vector<T>& weights, uint64_t step) {
    const PartRecipes& p = nx.parts();
    for (int s = 0; s < p.slots(); ++s) {
      const TensorFormat& f = p.at(s).weights;
      if (f.name == recipe->weights.name && f.rounding == recipe->weights.rounding) continue;
      for (const ParamRange& r : p.ranges[size_t(s)]) {
        if (recipe->autocast && std::any_of(norm_params.begin(), norm_params.end(),
                                            [&](const ParamRange& n) { return n.offset == r.offset; }))
          continue;  // autocast keeps the normalisations' parameters in FP32
        std::copy_n(weights.begin() + r.offset, r.count, cast_w.begin() + r.offset);
        round_role(std::span<T>(cast_w).subspan(r.offset, r.count), f, Role::kWeights, seed, step,
                   sr_keys::part_weight_cast(s), nullptr);
      }
    }
  }
  TrainerCore& operator=(const TrainerCore&) = delete;

  // One optimizer step of s: the numerics keyed to the step, the weight cast, then gradient(st),
  // the model's split step, which leaves the gradient in `grads` and returns the batch's loss, then
  // finish_step.
  template <class Gradient>
  StepStats step(RunState<T>& s, int64_t step, std::vector<T>* grads_out, Gradient&& gradient) {
    StepStats st;
    st.loss_scale = s.scaler.scale();
    nx.state = &s;
    nx.begin(uint64_t(step), &st);
    cast_weights(cast_w, s.weights, recipe, norm_params, seed, uint64_t(step), &st);
    cast_parts(s.weights, uint64_t(step));
    st.loss = gradient(st);
    finish_step(s, grads, recipe, opt, learning_rate(opt, step, total_steps), seed, uint64_t(step), st, grads_out);
    return st;
  }

  // An evaluation of s begins: the weights cast with the evaluation key, the numerics on probe (a
  // clone of s: evaluation must not advance delayed-scaling histories), no statistics.
  void begin_evaluation(const RunState<T>& s, RunState<T>& probe) {
    nx.state = &probe;
    nx.set_stats(nullptr);
    cast_weights(cast_w, s.weights, recipe, norm_params, seed, sr_keys::kEvalStep, nullptr);
    cast_parts(s.weights, sr_keys::kEvalStep);
  }
};

}  // namespace precsim

// The one implementation of model/numerics.h behind every trainer: a recipe's arithmetic in FP32
// opmath (T = float: RecipeGemm products, roundings into the recipe's formats with their roles'
// statistics), or the exact FP64 reference (T = double, no recipe: gemm_f64, nothing rounded). The
// model's keys (model/numerics.h ModelKeys, train/model_keys.h) say how a rounding's and a product's
// stochastic-rounding tensor ids and delayed-scaling slots are made; nothing here asks which model.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "precsim/sim/model/numerics.h"
#include "precsim/sim/parallel/split.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

template <class T>
class StepNumerics final : public Numerics<T> {
 public:
  // Throws std::invalid_argument naming a bad accumulation model or operand scheme of the recipe.
  // `layers`: the blocks whose statistics `layer` holds (the transformer's); 0 for none.
  StepNumerics(const Recipe* r, uint64_t seed, const ModelKeys& keys, int layers);

  RunState<T>* state = nullptr;          // delayed-scaling histories live in the state being stepped
  const ParallelSpec* parallel = nullptr;  // SyncBatchNorm's all-reduce algorithm
  GemmExecutor* executor = nullptr;      // null: the emulated gemm()
  std::vector<T> act_grads;              // observe_activation_grads since the last clear
  std::vector<TransformerLayerStats> layer;  // this step's, per block

  // The recipe's per-part recipes (none: every product and rounding takes the recipe).
  void set_parts(PartRecipes p);
  const PartRecipes& parts() const { return parts_; }

  // A step (or an evaluation chunk) begins: statistics restart, one row group keyed `step`.
  void begin(uint64_t step, StepStats* st);
  // Statistics from now on go to st (null: none), without restarting the step's.
  void set_stats(StepStats* st) { stats_ = st; }
  // The next forward and backward of a step: row group g takes step key keys[g]; statistics go on.
  void part(std::span<const uint64_t> keys);
  void part(uint64_t step) { part(std::span<const uint64_t>(&step, 1)); }

  void gemm(const GemmCall& call, T* c, const T* a, const T* b) override;
  void round(const RoundAt& at, std::span<T> v) override;
  T opmath(T x) override;
  bool low_opmath() const override { return r_ && r_->attention.low_opmath; }
  int row_groups() const override { return int(keys_.size()); }
  void reduce_across_groups(std::vector<T>& total, const std::vector<std::vector<T>>& groups) override;
  void observe_scores(int layer, std::span<const T> s) override;
  void observe_linear_input(int site, int layer, std::span<const T> x) override;
  void observe_activation_grads(std::span<const T> g) override { act_grads.insert(act_grads.end(), g.begin(), g.end()); }

 private:
  void recipe_gemm(const GemmCall& call, float* c, const float* a, const float* b);
  // The parameter gradient of the whole model rounded at once (the transformer's): the recipe's
  // format, then each part's ranges re-rounded from the unrounded values into its own.
  void round_weight_grads_by_part(std::span<T> v, uint64_t step);

  const Recipe* r_;
  uint64_t seed_;
  const ModelKeys* model_keys_;
  int layers_;
  StepStats* stats_ = nullptr;  // null: no statistics (evaluation)
  std::vector<uint64_t> keys_{0};
  uint32_t tensor_ = 0;  // ids the model has counted within the step key (ModelKeys)
  // (attention products in high precision ? kGemmPasses : 0) + pass.
  std::array<RecipeGemm, 2 * kGemmPasses> gemms_;
  PartRecipes parts_;
  std::vector<std::array<RecipeGemm, 2 * kGemmPasses>> part_gemms_;  // per slot when parts_ is active
  std::vector<std::array<double, 4>> sumsq_, count_;  // per block and linear input, this step
};

extern template class StepNumerics<float>;
extern template class StepNumerics<double>;

}  // namespace precsim

// One training step of the MLP under a recipe: forward, loss, backward, unscale, clip, optimizer,
// with every rounding point the recipe names and nothing else rounded. T = double with no recipe
// is the FP64 reference (and the chaos control); T = float with a recipe is a variant computing
// in FP32 opmath. The same code serves both, so the reference and a variant differ only where the
// recipe rounds.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/formats/quant_options.h"
#include "precsim/sim/data/batch.h"
#include "precsim/sim/data/data.h"
#include "precsim/sim/train/loss_scaler.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

template <class T>
class Trainer {
 public:
  // recipe == nullptr: exact arithmetic in T (the reference). sr_seed keys stochastic rounding.
  Trainer(const MlpLayout& layout, const Recipe* recipe, const OptimizerConfig& opt, Task task, uint64_t sr_seed,
          int64_t total_steps);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  RunState<T> init_state(const std::vector<double>& params) const;
  // How step() splits a batch (the recipe's split; 1 x 1 without a recipe). Throws
  // std::invalid_argument on bad counts.
  void set_split(const ParallelSpec& p, const AccumulationSpec& a);
  // One optimizer step on the global batch b, split into workers x micro-batches: rows
  // [(w N + m) R, (w N + m + 1) R) are worker w's micro-batch m. Throws std::invalid_argument if
  // the split does not divide b.rows.
  // grads_out (optional): the unscaled gradient before clipping, as the optimizer sees it (after
  // accumulation and all-reduce).
  StepStats step(RunState<T>& s, const BatchView& b, int64_t step, std::vector<T>* grads_out = nullptr);
  EvalResult evaluate(const RunState<T>& s, const BatchView& b);
  // Activation gradients of the last step (all layers, in order), for exponent histograms.
  const std::vector<T>& last_activation_grads() const;
  // Runs this trainer's matrix products on `b` (nullptr: the emulated gemm()). A recipe's trainer
  // only: the reference computes in FP64 without one.
  void set_gemm_executor(std::shared_ptr<GemmExecutor> b);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

extern template class Trainer<float>;
extern template class Trainer<double>;

}  // namespace precsim

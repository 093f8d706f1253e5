// One training step of the transformer under a recipe, as mlp_trainer.h does for the MLP: cast the
// weights, forward, token-mean cross-entropy, backward with loss scaling, unscale, clip, update.
// T = double without a recipe is the FP64 reference; T = float with a recipe a variant in FP32
// opmath. A step splits its sequences into W workers x N micro-batches as the recipe says
// (split_step.h: accumulation buffer, loss normalisation by counted tokens, all-reduce). Each
// step also measures attention logits and the inputs of every linear product.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/train/step_numerics.h"
#include "precsim/sim/train/step_types.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {

template <class T>
class TransformerTrainer {
 public:
  // recipe == nullptr: exact arithmetic in T (the reference). sr_seed keys stochastic rounding.
  TransformerTrainer(const TransformerLayout& layout, const Recipe* recipe, const OptimizerConfig& opt,
                     uint64_t sr_seed, int64_t total_steps);
  ~TransformerTrainer();
  TransformerTrainer(const TransformerTrainer&) = delete;
  TransformerTrainer& operator=(const TransformerTrainer&) = delete;

  RunState<T> init_state(const std::vector<double>& params) const;
  // How step() splits a batch (the recipe's split; 1 x 1 without a recipe). Throws
  // std::invalid_argument on counts below 1.
  void set_split(const ParallelSpec& p, const AccumulationSpec& a);
  // One optimizer step on the global batch: rows [(w N + m) R, (w N + m + 1) R) are worker w's
  // micro-batch m, a token's loss counts 1 / (counted tokens of the global batch), or, normalised
  // per micro-batch, 1 / (W N x counted tokens of its micro-batch). Throws std::invalid_argument if
  // the split does not divide the rows or no target counts. StepStats::loss is the mean
  // cross-entropy over the batch's counted tokens; grads_out as Trainer::step's.
  StepStats step(RunState<T>& s, const SeqBatch& b, int64_t step, std::vector<T>* grads_out = nullptr);
  // Token-mean loss and next-token accuracy over the counted tokens of the held-out rows.
  EvalResult evaluate(const RunState<T>& s, const SeqDataset& d);
  const std::vector<T>& last_activation_grads() const;
  // One per block, over every micro-batch of the last step.
  const std::vector<TransformerLayerStats>& last_layer_stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

extern template class TransformerTrainer<float>;
extern template class TransformerTrainer<double>;

}  // namespace precsim

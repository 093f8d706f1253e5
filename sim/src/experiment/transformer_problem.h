// The transformer on token sequences: what the runner's run_seed needs of a model and its data
// (trainers, the batch of a step, held-out evaluation) plus the per-layer statistics it logs.
#pragma once

#include <memory>
#include <vector>

#include "precsim/sim/data/data.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/train_results.h"
#include "precsim/sim/train/transformer_trainer.h"
#include "problem.h"

namespace precsim {

struct TransformerProblem
    : ProblemBase<TransformerTrainer<double>, TransformerTrainer<float>, SeqDataset, TransformerLayout> {
  std::vector<int> idx;
  SeqBatch b;

  TransformerProblem(const TrainConfig& cfg, uint64_t s)
      : ProblemBase(cfg, s, make_seq_dataset(cfg.seq_data, cfg.transformer.context, s)) {
    layout = make_transformer_layout(cfg.transformer, data.vocab);
    init = init_transformer(layout, cfg.transformer, s);
  }
  std::unique_ptr<Ref> reference(int64_t n) const { return std::make_unique<Ref>(layout, nullptr, c.optimizer, seed, n); }
  std::unique_ptr<Var> variant(const Recipe& r, int64_t n) const {
    return std::make_unique<Var>(layout, &r, c.optimizer, seed, n);
  }
  const SeqBatch& batch(int64_t step) {
    batch_indices(idx, data.train_rows, c.batch, seed, uint64_t(step));
    gather_rows(b, data, idx);
    return b;
  }
  template <class Tr, class S>
  EvalResult evaluate(Tr& t, const S& s) const {
    return t.evaluate(s, data);
  }
  // Logged steps: per block, the attention-logit amax and overflow fraction and, for the inputs of
  // the four linear products, max / RMS and the FP8 delayed-scaling scale (docs/reference/metrics.md).
  void observe(const Var& t, LayerSeries& layers, int64_t step, bool log) const {
    if (!log) return;
    layers.step.push_back(step);
    const auto& st = t.last_layer_stats();
    layers.blocks.resize(st.size());
    for (size_t l = 0; l < st.size(); ++l) {
      const auto& s = st[l];
      BlockSeries& b = layers.blocks[l];
      b.attn_logit_amax.push_back(s.score_amax);
      b.attn_logit_overflow_fraction.push_back(s.score_count ? double(s.score_overflow) / double(s.score_count) : 0.0);
      for (size_t i = 0; i < 4; ++i) {
        b.input_max_over_rms[i].push_back(s.input_rms[i] > 0 ? s.input_amax[i] / s.input_rms[i] : 0.0);
        b.input_fp8_scale[i].push_back(s.fp8_scale[i]);
      }
    }
  }
};

}  // namespace precsim

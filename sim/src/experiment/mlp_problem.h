// The MLP on tabular data: what the runner's run_seed needs of a model and its data (trainers, the
// batch of a step with its rows' item counts, held-out evaluation), as transformer_problem.h is
// for the transformer.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/items.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/train/mlp_trainer.h"
#include "problem.h"

namespace precsim {

struct BatchBuffers {
  std::vector<double> x, t, items;
  std::vector<int32_t> y;
};

inline BatchView batch_view(const Dataset& d, const std::vector<double>& row_items, const std::vector<int>& idx,
                            BatchBuffers& buf) {
  std::vector<double>& x = buf.x;
  std::vector<double>& t = buf.t;
  std::vector<int32_t>& y = buf.y;
  const int f = d.features, o = d.outputs;
  x.resize(idx.size() * f);
  for (size_t i = 0; i < idx.size(); ++i)
    std::copy_n(d.x_train.begin() + size_t(idx[i]) * f, f, x.begin() + i * f);
  BatchView b{x.data(), nullptr, nullptr, int(idx.size())};
  buf.items.resize(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) buf.items[i] = row_items[idx[i]];
  b.items = buf.items.data();
  if (d.task == Task::kClassification) {
    y.resize(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) y[i] = d.y_train[idx[i]];
    b.labels = y.data();
  } else {
    t.resize(idx.size() * o);
    for (size_t i = 0; i < idx.size(); ++i) std::copy_n(d.t_train.begin() + size_t(idx[i]) * o, o, t.begin() + i * o);
    b.targets = t.data();
  }
  return b;
}

inline BatchView heldout_view(const Dataset& d) {
  return BatchView{d.x_heldout.data(), d.y_heldout.empty() ? nullptr : d.y_heldout.data(),
                   d.t_heldout.empty() ? nullptr : d.t_heldout.data(), d.heldout_count()};
}

// The MLP on tabular data: what run_seed needs of a model and its data.
struct MlpProblem : ProblemBase<Trainer<double>, Trainer<float>, Dataset, MlpLayout> {
  BatchView held;
  std::vector<double> row_items;
  std::vector<int> idx;
  BatchBuffers bb;

  MlpProblem(const TrainConfig& cfg, uint64_t s)
      : ProblemBase(cfg, s, make_dataset(cfg.data, s)), held(heldout_view(data)),
        row_items(row_item_counts(cfg.items, data.train_count(), s)) {
    layout = make_mlp_layout(cfg.model, data.features, data.outputs);
    init = init_mlp(layout, cfg.model, s);
  }
  std::unique_ptr<Ref> reference(int64_t n) const {
    return std::make_unique<Ref>(layout, nullptr, c.optimizer, data.task, seed, n);
  }
  std::unique_ptr<Var> variant(const Recipe& r, int64_t n) const {
    return std::make_unique<Var>(layout, &r, c.optimizer, data.task, seed, n);
  }
  BatchView batch(int64_t step) {
    batch_indices(idx, data.train_count(), c.batch, seed, uint64_t(step));
    return batch_view(data, row_items, idx, bb);
  }
  template <class Tr, class S>
  EvalResult evaluate(Tr& t, const S& s) const {
    return t.evaluate(s, held);
  }
  void observe(const Var&, LayerSeries&, int64_t, bool) const {}  // an MLP has no per-layer statistics
};

}  // namespace precsim

// What run_seed needs of every problem (a model and its data): the trainer types, the
// configuration and seed, the data set, the model's layout and its initial parameters. Each
// problem (mlp_problem.h, transformer_problem.h) adds its trainers, the batch of a step, held-out
// evaluation and the per-layer statistics it logs.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "precsim/sim/experiment/runner.h"

namespace precsim {

template <class RefTrainer, class VarTrainer, class Data, class Layout>
struct ProblemBase {
  using Ref = RefTrainer;
  using Var = VarTrainer;
  const TrainConfig& c;
  uint64_t seed;
  Data data;
  Layout layout;              // set by the problem's constructor, from data
  std::vector<double> init;   // set by the problem's constructor, from layout

  ProblemBase(const TrainConfig& cfg, uint64_t s, Data d) : c(cfg), seed(s), data(std::move(d)) {}
};

}  // namespace precsim

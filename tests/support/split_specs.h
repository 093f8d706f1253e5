// Step configurations the split-step tests (MLP and transformer) build their variants from: plain
// SGD, W workers with an averaging mode, N micro-batches with a loss normalisation.
#pragma once

#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/parallel/split.h"

namespace precsim::test_support {

inline OptimizerConfig sgd() {
  OptimizerConfig o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.1;
  return o;
}

inline ParallelSpec workers(int w, AverageMode avg = AverageMode::kDdp) {
  ParallelSpec p;
  p.workers = w;
  p.average = avg;
  return p;
}

inline AccumulationSpec micro(int n, LossNormalization norm = LossNormalization::kGlobalItemCount) {
  AccumulationSpec a;
  a.micro_batches = n;
  a.normalization = norm;
  return a;
}

}  // namespace precsim::test_support

// The cross-worker half of a split training step: the workers' accumulated gradients become one
// gradient, through DDP buckets and the simulated all-reduce (FP32 opmath variants), or summed
// exactly in order (the FP64 path).
#pragma once

#include <vector>

#include "precsim/sim/split.h"

namespace precsim {

// What the averaging divides the sum by: W, or 1 for average "sum" without a hook. Each worker's
// loss is multiplied by it beforehand so that every normalisation means the same loss.
int average_divisor(const ParallelSpec& p);

// out = the all-reduced gradient; workers[w] is worker w's accumulated gradient, tensors the
// parameter tensors of the flat buffer in parameter order. Each DDP bucket (ddp_buckets) is
// all-reduced on its own. Non-finite gradients (an FP16 overflow the loss scaler will skip) are
// summed in FP32 instead, so that the inf/NaN reaches the scaler. Returns false if any rank's
// buffer differed from the others.
bool bucketed_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p);
// FP64: out = (sum over w in order of workers[w]) / average_divisor.
bool bucketed_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p);

}  // namespace precsim

// The model-agnostic pieces of a split training step: the loss normalisation of each micro-batch,
// the accumulation buffer within a worker, and the cross-worker half, where the workers'
// accumulated gradients become one gradient through DDP buckets and the simulated all-reduce (FP32
// opmath variants), or are summed exactly in order (the FP64 path). Each trainer runs its own
// micro-batch loop (forward and backward are the model's) around a GradientSplit. The
// stochastic-rounding keys of the parts are sr_keys.h's.
#pragma once

#include <cstdint>
#include <vector>

#include "precsim/sim/parallel/split.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// What the summed loss of a micro-batch's items is divided by: the items of the whole global batch
// (global-item-count), or W N x the micro-batch's own items (mean-per-micro-batch, whose W N
// micro-batch means are then averaged). 0 items: 0, the micro-batch carries no gradient.
double loss_denominator(const AccumulationSpec& a, double global_items, int parts, double micro_items);

// buf = round(buf + g) in the accumulation buffer's format and rounding, counted under
// Role::kGradAccumulation with the stochastic-rounding key (seed, step, tensor of `part`). comp is
// the Kahan compensation (Kahan 1965: y = g - c; t = fl(buf + y); c = fl((t - buf) - y); buf = t),
// used only with rounding kahan; g is overwritten then. exact (no recipe), or a buffer format that
// holds T: a plain sum.
template <class T>
void accumulate_gradient(std::vector<T>& buf, std::vector<T>& comp, std::vector<T>& g, const AccumulationSpec& a,
                         bool exact, uint64_t seed, uint64_t step, uint32_t part, StepStats* st);

// Whether the all-reduce leaves one worker's gradient unchanged: one worker, no compression hook,
// a buffer format that holds T (always when exact).
template <class T>
bool allreduce_is_identity(const ParallelSpec& p, bool exact);

// What the averaging divides the sum by: W, or 1 for average "sum" without a hook. Each worker's
// loss is multiplied by it beforehand so that every normalisation means the same loss.
int average_divisor(const ParallelSpec& p);

// out = the all-reduced gradient; workers[w] is worker w's accumulated gradient, tensors the
// parameter tensors of the flat buffer in parameter order. Each DDP bucket (ddp_buckets) is
// all-reduced on its own. Non-finite gradients (an FP16 overflow the loss scaler will skip) are
// summed in FP32 instead, so that the inf/NaN reaches the scaler. Returns false if any rank's
// buffer differed from the others. stats, nonzero (optional) add up the all-reduce's roundings
// (AllReduceResult::stats) over the buckets: the role `allreduce` of a step.
bool bucketed_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p, QuantStats* stats = nullptr,
                        uint64_t* nonzero = nullptr);
// FP64: out = (sum over w in order of workers[w]) / average_divisor; nothing is rounded or counted.
bool bucketed_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p, QuantStats* stats = nullptr,
                        uint64_t* nonzero = nullptr);

// SyncBatchNorm's backward all-reduce (torch.distributed.all_reduce SUM of each worker's
// sum(dy) and sum(dy xhat)): out = the sum over w of workers[w], in an FP32 buffer with the
// variant's algorithm (FP32 opmath), or summed in rank order (FP64, or a non-finite value).
void sync_batchnorm_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                              const ParallelSpec& p);
void sync_batchnorm_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                              const ParallelSpec& p);

// The split of every trainer's step: W workers x N micro-batches (part p = w N + m is worker w's
// micro-batch m), each worker's accumulation buffer (and Kahan compensation), and the parameter
// tensors in parameter order (the DDP bucket units). A step calls begin, then per part the model's
// forward and backward and accumulate, then allreduce.
template <class T>
class GradientSplit {
 public:
  GradientSplit(std::vector<ParamRange> tensors, size_t param_count, bool exact)
      : tensors_(std::move(tensors)), param_count_(param_count), exact_(exact) {}
  // Throws std::invalid_argument on bad counts (check_split_counts).
  void set(const ParallelSpec& p, const AccumulationSpec& a);
  const ParallelSpec& parallel() const { return par_; }
  const AccumulationSpec& accumulation() const { return acc_; }
  int parts() const { return par_.workers * acc_.micro_batches; }
  // Rows of one part; throws std::invalid_argument if the parts do not divide `rows`.
  int part_rows(int rows) const;
  // Zeroes the accumulation buffers (the start of a step).
  void begin();
  // Whether one part's gradient is already the step's (one part, an identity all-reduce): the
  // trainer then stops after the first backward.
  bool single_part_is_final() const { return parts() == 1 && allreduce_is_identity<T>(par_, exact_); }
  // Adds part's gradient g (overwritten with Kahan) into its worker's buffer.
  void accumulate(int part, std::vector<T>& g, uint64_t seed, uint64_t step, StepStats* st);
  // grads = the all-reduced gradient of the workers' buffers; statistics under role all_reduce.
  void allreduce(std::vector<T>& grads, StepStats& st);

 private:
  std::vector<ParamRange> tensors_;
  size_t param_count_;
  bool exact_;
  ParallelSpec par_;
  AccumulationSpec acc_;
  std::vector<std::vector<T>> buffers_, compensations_;  // per worker
};

extern template class GradientSplit<float>;
extern template class GradientSplit<double>;

}  // namespace precsim

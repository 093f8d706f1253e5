// What every trainer's step works with, whatever the model: the state of a run (weights, master
// copy, optimizer states, loss scaler, delayed-scaling histories), what a step reports (loss,
// skipped steps, rounding statistics per role), an evaluation's result, and where a variant's matrix
// products run (GemmExecutor).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "precsim/formats/quant_options.h"
#include "precsim/sim/model/numerics.h"
#include "precsim/sim/train/loss_scaler.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {

class DelayedScaling;
struct AccumModel;
struct GemmArgs;

// Where a variant's matrix products run. The default (none set) is the emulated gemm(); another
// backend (sim/include/precsim/sim/hw/gpu_train.h: cuBLASLt) gets the same operands, already in the
// recipe's formats, and must write C (m x n, row-major, packed) = op(A) op(B) as GemmArgs lays
// them out; `model` is the recipe's accumulation model for that product, which the emulation
// would use.
class GemmExecutor {
 public:
  virtual ~GemmExecutor() = default;
  virtual void gemm(GemmPass pass, const AccumModel& model, const GemmArgs& args, const float* a, const float* b,
                    float* c) = 0;
  // What a report should know of the backend's calls is the backend's own (hw/gpu_train.h: the
  // algorithms cuBLASLt chose), read where reports are written.
};

using RoleStats = std::array<QuantStats, static_cast<size_t>(Role::kCount)>;

template <class T>
struct RunState {
  std::vector<T> weights;  // the master copy, or the stored low-precision weights without one
  std::vector<T> kahan;    // compensation of update_rounding kahan, in the weights' format
  std::vector<T> m, v;     // optimizer states
  std::vector<T> bn_mean, bn_var;  // BatchNorm running statistics (evaluation mode)
  int64_t opt_steps = 0;   // optimizer steps taken (skipped steps not counted)
  LossScaler scaler{LossScaling{}};
  std::vector<std::shared_ptr<DelayedScaling>> delayed;  // per GEMM operand (delayed FP8 scaling)
  RunState clone() const;  // deep copy (delayed-scaling histories included)
};

struct StepStats {
  double loss = 0;          // loss of the global batch, sum of items x row loss / items, unscaled
  bool found_inf = false;   // a non-finite gradient was seen
  bool skipped = false;     // the optimizer step was skipped (loss scaler)
  float loss_scale = 1.0f;  // the scale this step used
  double grad_norm = 0;     // of the unscaled gradient, before clipping
  double lr = 0;
  RoleStats roles{};
  // Non-zero finite values entering each role's roundings: the denominator of its flush fraction.
  std::array<uint64_t, static_cast<size_t>(Role::kCount)> role_nonzero{};
  uint64_t updates_intended = 0;  // parameters with a non-zero intended update
  uint64_t updates_lost = 0;      // ... whose stored value did not change (stagnation)
  bool ranks_identical = true;    // every simulated rank ended the all-reduce with the same bits
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // classification only
};

}  // namespace precsim

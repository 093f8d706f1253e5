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
#include "precsim/sim/data.h"
#include "precsim/sim/loss_scaler.h"
#include "precsim/sim/mlp.h"
#include "precsim/sim/optimizer.h"
#include "precsim/sim/recipe.h"

namespace precsim {

class DelayedScaling;
struct AccumModel;
struct GemmArgs;

// The matrix products of a training step, by where they occur.
enum class GemmPass : int { kForward = 0, kDgrad = 1, kWgrad = 2 };

// Where a variant's matrix products run. The default (none set) is the emulated gemm(); another
// backend (sim/include/precsim/sim/gpu_train.h: cuBLASLt) gets the same operands, already in the
// recipe's formats, and must write C (m x n, row-major, packed) = op(A) op(B) as GemmArgs lays
// them out; `model` is the recipe's accumulation model for that product, which the emulation
// would use.
class GemmBackend {
 public:
  virtual ~GemmBackend() = default;
  virtual void gemm(GemmPass pass, const AccumModel& model, const GemmArgs& args, const float* a, const float* b,
                    float* c) = 0;
  // What a report should know of the backend's calls (algorithms chosen, options), as a JSON object.
  virtual nlohmann::json report() const = 0;
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

struct BatchView {
  const double* x = nullptr;        // (rows, features)
  const int32_t* labels = nullptr;  // classification
  const double* targets = nullptr;  // regression (rows, outputs)
  int rows = 0;
  const double* items = nullptr;    // (rows) items of each row, 0: masked; null: one each
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // classification only
};

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
  void set_gemm_backend(std::shared_ptr<GemmBackend> b);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

extern template class Trainer<float>;
extern template class Trainer<double>;

}  // namespace precsim

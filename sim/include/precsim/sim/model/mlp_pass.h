// The MLP's forward and backward passes over a Numerics (model/numerics.h): linear layers
// (linear.h), LayerNorm or BatchNorm, activation, residual, and the loss. A forward's rows may
// form several row groups (SyncBatchNorm: worker w's micro-batch is group w): each group runs its
// own products and roundings with its own step key, and BatchNorm's statistics span all groups.
#pragma once

#include <cstdint>
#include <vector>

#include "precsim/sim/data/batch.h"
#include "precsim/sim/data/data.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/model/numerics.h"

namespace precsim {

// The MLP's rounding points within a layer (RoundAt::slot); train/sr_keys.h makes their ids.
enum class MlpForward : uint32_t { kLinearOut = 0, kNormOut = 1, kActivation = 2, kResidual = 3 };
enum class MlpBackward : uint32_t {
  kWeightGrad = 0,      // weight_grads
  kBiasGrad = 1,        // weight_grads
  kInputGrad = 2,       // activation_grads: d(input of this layer)
  kActivationGrad = 3,  // activation_grads: d(pre-activation of the layer below)
  kNormInputGrad = 4,   // activation_grads: through the layer below's norm
  kNormWeightGrad = 5,  // weight_grads
  kNormBiasGrad = 6,    // weight_grads
  kLossGrad = 7,        // activation_grads: d(loss) / d(output), at layer = layers
};

// What the forward pass keeps for the backward pass, and the backward's scratch; sized by mlp_forward.
template <class T>
struct MlpActs {
  int rows = 0;
  // Per layer: its input (layer_in[layers] is the output), linear output, normalisation output,
  // mean and rstd (LayerNorm: per row; BatchNorm: per channel, with its biased variance), activation.
  std::vector<std::vector<T>> layer_in, linear_out, norm_out, mean, rstd, bn_var, act_out;
  std::vector<T> losses, probs, targets;  // per row; softmax (rows,output); regression targets
  std::vector<int32_t> labels;
  // Backward: d(linear output), d(layer input), d(activation input), d(residual stream).
  std::vector<T> dlinear_out, dlayer_in, dact_in, dresidual;
  std::vector<T> bn_group_stats, bn_total_sums;
  std::vector<std::vector<T>> bn_group_sums;
};

// BatchNorm's running statistics (RunState::bn_mean, bn_var, indexed by LinearSlots::bn_stats):
// evaluation normalises with them; a training forward updates them when `update` (PyTorch:
// momentum 0.1, unbiased variance).
template <class T>
struct BatchNormRunning {
  T* mean = nullptr;
  T* var = nullptr;
  bool train = true;
  bool update = true;
};

// Forward of b's rows (nx.row_groups() groups) and each row's loss (acts.losses): cross-entropy
// over the classes or mean squared error.
template <class T>
void mlp_forward(MlpActs<T>& a, const T* params, const MlpLayout& l, Task task, const BatchView& b,
                 BatchNormRunning<T> bn, Numerics<T>& nx);
// Backward of the last forward. row_dloss[r]: d(scaled loss) / d(loss of row r). Row group g's
// parameter gradient is written to group_grads[g] (resized to param_count, zeroed first).
template <class T>
void mlp_backward(std::vector<std::vector<T>>& group_grads, MlpActs<T>& a, const T* params, const MlpLayout& l,
                  Task task, const T* row_dloss, Numerics<T>& nx);

}  // namespace precsim

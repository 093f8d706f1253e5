// The arithmetic a model's forward and backward passes run with, whatever the model: every matrix
// product (a GemmCall), every rounding point (a RoundAt), the opmath of softmax and LayerNorm,
// SyncBatchNorm's reduction across row groups, and hooks that observe tensors for statistics. The
// model code (mlp_pass.h, transformer.h, linear.h) calls only this; a trainer backs it with its
// recipe (train/step_numerics.h) or with exact FP64 (no rounding, gemm_f64). The model never sees a
// recipe: which format a point rounds into, and with which stochastic-rounding key, is the
// implementation's (train/sr_keys.h).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "precsim/sim/accum/gemm.h"

namespace precsim {

// Which GEMM of a linear product: the forward product, the input gradient (dgrad) or the weight
// gradient (wgrad). The attention's backward products count as dgrad (dP, dQ) and wgrad (dV, dK)
// by their operand roles. The values index the recipe's forward/dgrad/wgrad specs and are part of
// the stochastic-rounding and delayed-scaling keys.
enum class GemmPass : int { kForward = 0, kDgrad = 1, kWgrad = 2 };
constexpr int kGemmPasses = 3;

// Products below this many multiply-adds run on one thread: at these sizes forking (and OpenMP's
// spinning on a loaded machine) costs more than it saves; results never depend on it.
constexpr int64_t kSerialGemmMacs = int64_t{1} << 22;

// One call of `batch` stacked products C_i = op(A_i) op(B_i), C (m,n) row-major and overwritten.
// A is (m,k), or stored (k,m) with trans_a; B is stored (n,k) with trans_b (so both operands run
// along K in memory), else (k,n). Only batch 1 may transpose A or store B untransposed. site names
// the product within the model (the transformer's TfSite; 0 for the MLP), layer its layer, group
// the row group whose stochastic-rounding step key it takes.
struct GemmCall {
  GemmPass pass = GemmPass::kForward;
  int site = 0;
  int layer = 0;
  int group = 0;
  int m = 0, n = 0, k = 0;
  int batch = 1;
  bool trans_a = false, trans_b = true;
};

// The gemm() arguments of one of a call's stacked products.
GemmArgs gemm_call_args(const GemmCall& call);
// The exact product: gemm_f64 (sequential sums in increasing k) over a call's stacked products.
void gemm_call_f64(const GemmCall& call, double* c, const double* a, const double* b);

// The rounding points of a model besides the GEMM operands.
enum class RoundPoint : uint8_t {
  kActivation,  // an op output stored for later (linear outputs, activations, residual sums)
  kNormOut,     // a normalisation's output (kept in FP32 under autocast)
  kScores,      // the attention product Q K^T and the probabilities, in the scores format
  kActGrad,     // a gradient flowing between ops
  kWeightGrad,  // a parameter gradient
};

// One rounding: its point, the model's layer, `slot` naming it within the layer (the MLP's
// MlpForward/MlpBackward, from which the MLP's stochastic-rounding ids are made; the transformer's
// roundings take a running count instead and leave it 0), and the row group whose step key it takes.
struct RoundAt {
  RoundPoint point = RoundPoint::kActivation;
  int layer = 0;
  uint32_t slot = 0;
  int group = 0;
};

// What one block saw in one forward pass, as the observe_* hooks collect it (the transformer's
// blocks; models without attention observe none).
struct TransformerLayerStats {
  double score_amax = 0;        // max |Q K^T| over unmasked logits, before the 1/sqrt(hs) scale
  uint64_t score_count = 0;     // unmasked logits
  uint64_t score_overflow = 0;  // ... whose magnitude exceeds the scores format's largest finite value
  // Inputs of the qkv, attention-projection, fc and fc-projection products: max |x| and RMS, and
  // the FP8 delayed-scaling encode scale applied to that operand this step (0 when none).
  std::array<double, 4> input_amax{}, input_rms{}, fp8_scale{};
};

// How a model's products and roundings take their stochastic-rounding tensor ids and
// delayed-scaling slots, and which of its products and tensors the numerics treat apart: each model
// supplies one (train/model_keys.h: the MLP's per-layer ids, the transformer's running count), so
// the numerics behind Numerics<T> never ask which model they run. `count` is the running count of
// ids handed out within the current step key; a model that numbers its tensors in order advances it.
class ModelKeys {
 public:
  struct GemmIds {
    uint32_t a = 0, b = 0;    // the operands' tensor ids
    size_t delayed_slot = 0;  // A's delayed-scaling history; B's is the next
  };
  virtual ~ModelKeys() = default;
  virtual GemmIds gemm(const GemmCall& call, uint32_t& count) const = 0;
  virtual uint32_t round(const RoundAt& at, uint32_t& count) const = 0;
  // The layer whose part recipe a rounding takes.
  virtual int part_layer(const RoundAt& at) const { return at.layer; }
  // Attention's products (Q K^T, P V), whose operands the recipe's attention precision decides.
  virtual bool attention_product(int site) const { return (void)site, false; }
  // Whether the model has attention products at all (their high-precision products are then made).
  virtual bool has_attention() const { return false; }
  // Sites 0 .. observed_sites() - 1 are the linear products whose inputs per-block statistics follow.
  virtual int observed_sites() const { return 0; }
  // Whether the parameter gradient is rounded at once (one RoundAt for every parameter), so that
  // per-part weight-gradient formats re-round their parameter ranges afterwards.
  virtual bool whole_weight_grads() const { return false; }
};

template <class T>
class Numerics {
 public:
  virtual ~Numerics() = default;
  virtual void gemm(const GemmCall& call, T* c, const T* a, const T* b) = 0;
  // Rounds a tensor at a rounding point in place (the reference rounds nothing).
  virtual void round(const RoundAt& at, std::span<T> v) = 0;
  void round(RoundPoint point, int layer, std::span<T> v) { round(RoundAt{point, layer, 0, 0}, v); }
  // A gradient flowing between ops: observed as it enters its rounding point, then rounded.
  void round_grad(const RoundAt& at, std::span<T> v) {
    observe_activation_grads(v);
    round(at, v);
  }
  // Rounding of the intermediate values of softmax and LayerNorm: identity in FP32 opmath, the
  // activations' format when a recipe computes them in the low format.
  virtual T opmath(T x) { return x; }
  virtual bool low_opmath() const { return false; }
  // The row groups of one forward: 1, or under SyncBatchNorm one per worker, each with its own
  // stochastic-rounding step key (its rows split the batch evenly, group order).
  virtual int row_groups() const { return 1; }
  // SyncBatchNorm's all-reduce: total = the sum over the groups of groups[g] (each the same
  // length). This default sums in group order, what one process computing exactly does.
  virtual void reduce_across_groups(std::vector<T>& total, const std::vector<std::vector<T>>& groups);
  // Statistics hooks: the attention scores of a layer after masking (before rounding), the input
  // of a linear layer's forward product, and the activation gradients of a backward pass.
  virtual void observe_scores(int layer, std::span<const T> s) { (void)layer, (void)s; }
  virtual void observe_linear_input(int site, int layer, std::span<const T> x) { (void)site, (void)layer, (void)x; }
  virtual void observe_activation_grads(std::span<const T> g) { (void)g; }
};

template <class T>
void Numerics<T>::reduce_across_groups(std::vector<T>& total, const std::vector<std::vector<T>>& groups) {
  total.assign(groups.empty() ? 0 : groups[0].size(), T(0));
  for (const auto& g : groups)
    for (size_t i = 0; i < total.size(); ++i) total[i] += g[i];
}

}  // namespace precsim

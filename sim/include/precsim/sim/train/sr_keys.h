// The stochastic-rounding key scheme of a training step, in one place. A rounding's bits come from
// SrKey{seed, step, tensor, role}: two roundings share bits only if all four agree. The step key
// separates steps, micro-batches and evaluation; the role separates the recipe's tensor roles; the
// tensor id separates the roundings of one role within one step key. Every value here is part of
// the reproducibility contract: changing one changes every stochastically rounded result.
//
// Step keys (64 bits): training step s in [0, 2^40); micro-batch part p adds p << 44 (part 0
// keeps the plain step); evaluation passes use 2^40 + the chunk's first row, above every training
// step and below part 1.
//
// Tensor ids (32 bits), by range:
//   [0, 2^20)          per-layer roundings: the MLP's layer * 8 + slot (below), or the
//                      transformer's running count of roundings within one step key
//   2^20               the weight cast (role weights)
//   2^21               the MLP's loss gradient (role activation_grads)
//   2^22 + layer*8+k   the MLP's backward roundings
//   2^23, 2^23 + 1     optimizer states m, v (role optimizer_state)
//   2^24, 2^24 + 1     the weight update (master_weights), its Kahan compensation (optimizer_state)
//   2^25 + part        the gradient accumulation buffer of micro-batch part (grad_accumulation)
// Ranges stay apart while layers < 2^17 and the transformer counts fewer than 2^20 roundings per
// micro-batch (tests/sr_keys_test.cpp enumerates the ids of several layouts).
#pragma once

#include <cstddef>
#include <cstdint>

#include "precsim/sim/model/mlp_pass.h"
#include "precsim/sim/model/numerics.h"

namespace precsim::sr_keys {

// ---- step keys ----
constexpr uint64_t kEvalStep = uint64_t{1} << 40;
constexpr int kPartShift = 44;
constexpr uint64_t part_step(uint64_t step, int part) { return step + (uint64_t(part) << kPartShift); }
constexpr uint64_t eval_step(uint64_t first_row) { return kEvalStep + first_row; }

// ---- tensor ids outside the layers ----
constexpr uint32_t kLayerIdsEnd = 1u << 20;  // per-layer ids (and the transformer's counter) stay below
constexpr uint32_t kWeightCast = 1u << 20;
// A model part's weights re-cast into its own format (per-part recipes), slot = PartRecipes slot.
constexpr uint32_t part_weight_cast(int slot) { return kWeightCast + 1 + uint32_t(slot); }
constexpr uint32_t kLossGrad = 1u << 21;
constexpr uint32_t kBackward = 1u << 22;
constexpr uint32_t kOptimizerM = 1u << 23;
constexpr uint32_t kOptimizerV = kOptimizerM + 1;
constexpr uint32_t kWeightUpdate = 1u << 24;
constexpr uint32_t kWeightUpdateKahan = kWeightUpdate + 1;
constexpr uint32_t kGradAccum = 1u << 25;
constexpr uint32_t grad_accum(uint32_t part) { return kGradAccum + part; }

// ---- the MLP's per-layer ids: layer * kLayerStride + slot ----
constexpr uint32_t kLayerStride = 8;
// The rounding points of a layer (model/mlp_pass.h): forward ones (role activations) at
// layer * kLayerStride + slot, backward ones offset by kBackward; MlpBackward::kLossGrad is kLossGrad.
using precsim::MlpBackward;
using precsim::MlpForward;
constexpr uint32_t mlp_forward(int layer, MlpForward p) { return uint32_t(layer) * kLayerStride + uint32_t(p); }
constexpr uint32_t mlp_backward(int layer, MlpBackward p) {
  return kBackward + uint32_t(layer) * kLayerStride + uint32_t(p);
}
// A GEMM operand (0: A, 1: B) of a layer's product in `pass` (roles gemm_in_*).
constexpr uint32_t mlp_gemm(int layer, GemmPass pass, int operand) {
  return uint32_t(layer) * kLayerStride + uint32_t(pass) * 2 + uint32_t(operand);
}

// ---- delayed-scaling slots (RunState::delayed): one amax history per GEMM operand ----
constexpr size_t mlp_delayed_slot(int layer, GemmPass pass, int operand) {
  return size_t(layer) * 6 + size_t(pass) * 2 + size_t(operand);
}
// The transformer's products: `site` of `sites` (TfSite) at block `layer` (-1 .. blocks; the
// logits use layer = blocks).
constexpr size_t transformer_delayed_slot(int layer, int site, int sites, GemmPass pass, int operand) {
  return ((size_t(layer + 1) * size_t(sites) + size_t(site)) * 3 + size_t(pass)) * 2 + size_t(operand);
}

static_assert(mlp_backward(0, MlpBackward::kWeightGrad) > kLossGrad);
static_assert(part_step(kEvalStep - 1, 0) < eval_step(0) && eval_step((uint64_t{1} << kPartShift) - kEvalStep - 1) <
                                                                 part_step(0, 1));

}  // namespace precsim::sr_keys

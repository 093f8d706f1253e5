// Per-part recipes: a recipe may give named parts of a model their own recipe keys (MLP layers by
// index, transformer parts by path) and keep layers in BF16; attribution and search build their
// counterfactual recipes from the same pieces: the recipe keys of a set of tensor roles or GEMM
// passes (role_patch), taken from another recipe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "precsim/sim/parallel/split.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {

// Groups of recipe keys, each what one tensor role or GEMM pass of a step is computed with
// (docs/reference/metrics.md "attribute" lists the keys of each group).
enum PartBits : uint32_t {
  kPartWeights = 1u << 0,          // weights; gemm.forward.b, gemm.dgrad.b
  kPartActivations = 1u << 1,      // activations, autocast, attention; gemm.forward.a, gemm.wgrad.b, gemm.forward.accum
  kPartActivationGrads = 1u << 2,  // activation_grads, loss_scaling; gemm.dgrad.a, gemm.wgrad.a, gemm.dgrad.accum
  kPartWeightGrads = 1u << 3,      // weight_grads; gemm.wgrad.accum
  kPartOptimizerState = 1u << 4,   // optimizer_state
  kPartMasterWeights = 1u << 5,    // master_weights, update_rounding
  kPartGradAccumulation = 1u << 6, // accumulation.buffer_format, accumulation.rounding
  kPartAllReduce = 1u << 7,        // parallel.allreduce.{algorithm, format, average, hook}
  kPartForward = 1u << 8,          // gemm.forward
  kPartDgrad = 1u << 9,            // gemm.dgrad
  kPartWgrad = 1u << 10,           // gemm.wgrad
};
// What a model part may set: the per-layer roles (and so every GEMM pass).
constexpr uint32_t kLayerParts = kPartWeights | kPartActivations | kPartActivationGrads | kPartWeightGrads;
constexpr uint32_t kAllRoleParts = kLayerParts | kPartOptimizerState | kPartMasterWeights | kPartGradAccumulation | kPartAllReduce;

// base with the groups in `bits` taken from donor (its per-part overrides kept).
Recipe mix_recipe(const Recipe& base, const Recipe& donor, uint32_t bits);
// The fields of the groups in `bits` copied from donor into r (for_part: as role_patch's for_part),
// unchecked: resolve_mixed makes the result a recipe.
void take_roles(Recipe& r, const Recipe& donor, uint32_t bits, bool for_part);
// A recipe whose keys were all set at once (a mix, a part's recipe) checked and resolved as
// recipe_from_json does a config's: the NVFP4 / MX switches turned off where their operands are no
// longer NVFP4 (MX), apply_block_recipe, every gradient operand's rounding counted as given, and
// the block-scaled instruction checks. Throws std::invalid_argument naming what contradicts.
void resolve_mixed(Recipe& r);
// A part named `name` that sets the keys of the role groups in `bits` (as role_patch with for_part)
// to donor's values.
RecipePart part_from_roles(std::string name, const Recipe& donor, uint32_t bits);
// base (its own parts dropped) with a part applied: its preset's per-layer keys first, then its
// keys, then resolve_mixed. Throws std::invalid_argument naming "layers.NAME".
Recipe apply_part(const Recipe& base, const RecipePart& part);


// The parts of a model that can take their own recipe ("slots"): the MLP's linear layers 0..n-1;
// the transformer's embedding, per block i the block (its stored activations and gradients) and its
// attention and MLP products, and the head. Each slot's recipe is the base with the matching part
// keys applied, the more general name first: keep_bf16_layers, "*" / "blocks.*", the index, then
// "blocks.*.attention" / "blocks.*.mlp" and "blocks.i.attention" / "blocks.i.mlp".
class PartRecipes {
 public:
  PartRecipes() = default;
  // layers: the MLP's linear layers or the transformer's blocks. Throws std::invalid_argument for a
  // part name that is unknown or out of range, listing the valid ones.
  PartRecipes(const Recipe& base, bool transformer, int layers);
  // False when the recipe names no part: every rounding and product takes the base recipe.
  bool active() const { return !recipes_.empty(); }
  int slots() const { return int(recipes_.size()); }
  const Recipe& at(int slot) const { return recipes_[size_t(slot)]; }
  std::string slot_name(int slot) const;
  // The slot of a product (GemmCall layer and site) and of a rounding point (RoundAt layer).
  int gemm_slot(int layer, int site) const;
  int round_slot(int layer) const;
  // Parameter ranges of each slot (set by the trainer): re-rounded into the slot's weights format
  // in the weight cast and its weight_grads format where the model rounds all gradients at once.
  std::vector<std::vector<ParamRange>> ranges;

 private:
  bool transformer_ = false;
  int layers_ = 0;
  std::vector<Recipe> recipes_;
};

// The part names a recipe may use for a model, for messages and --help.
std::string valid_part_names(bool transformer, int layers);
// The layers keep_bf16_layers selects (ascending), for a model of `layers` layers; throws
// std::invalid_argument for an index out of range.
std::vector<int> keep_bf16_selection(const KeepBf16Layers& k, int layers);

}  // namespace precsim

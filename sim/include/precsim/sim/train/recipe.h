// A precision recipe: the format and rounding of every tensor role of a training step, the
// scaling of each GEMM operand, the loss scaler and the update rule, every value resolved (formats,
// accumulation models, scale rules): nothing downstream parses a recipe's text again. Named presets
// (one table, recipe_presets()) expand to a full, explicit Recipe; a config starts from a preset and
// overrides any field (recipe_json.h, the only place a recipe meets JSON); the resolved recipe is
// written into every report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/parallel/split.h"

namespace precsim {

// The rounding points of a step, also the stochastic-rounding stream ids and the keys of the
// per-role statistics in reports.
enum class Role : uint32_t {
  kWeights,          // the compute copy of the weights (cast from the master copy each step)
  kMasterWeights,    // the copy the optimizer updates
  kActivations,      // stored outputs of every op of the forward pass
  kGemmInForward,    // operands of Y = X W^T
  kGemmInDgrad,      // operands of dX = dY W
  kGemmInWgrad,      // operands of dW = dY^T X
  kActivationGrads,  // gradients flowing backwards between ops (the loss gradient included)
  kWeightGrads,      // parameter gradients as produced by the backward pass
  kOptimizerState,   // momentum / Adam moments
  kGradAccumulation, // the gradient accumulation buffer across micro-batches (and its Kahan compensation)
  kAllReduce,        // the data-parallel all-reduce: bucket casts, every hop's add, the averaging
  kCount
};
std::string_view to_string(Role);

// A tensor stored in a format with a rounding mode. "fp64" in a float computation means "not
// rounded": the reference keeps every value exact to double.
struct TensorFormat {
  std::string name = "fp32";
  Rounding rounding = Rounding::kNearestEven;
  Format format = format_by_name("fp32");  // resolved from name
};

// How one GEMM operand is brought into its format (docs/reference/sources.md §1, §3).
enum class Scaling : uint8_t {
  kNone,           // plain cast into the format
  kTensorCurrent,  // one FP32 scale fmt_max / amax of the tensor (TE Float8CurrentScaling)
  kTensorDelayed,  // scale from the amax history of earlier steps (TE DelayedScaling)
  kRowwise,        // 1 x block along the reduction dimension, FP32 power-of-two scales
  kBlock2d,        // block x block tiles, FP32 power-of-two scales (DeepSeek-V3 weights)
  kMx,             // OCP MX: one E8M0 scale per `block` elements along the reduction dimension
  kNvfp4,          // E4M3 scale per 16 elements plus an FP32 tensor scale
};
std::string_view to_string(Scaling);
Scaling parse_scaling(std::string_view);

struct OperandSpec {
  TensorFormat fmt;
  Scaling scaling = Scaling::kNone;
  int block = 0;  // block length for kRowwise, kBlock2d, kMx, kNvfp4
  // Set from the recipe's switches (BlockRecipe), not read from the operand's JSON:
  bool two_d = false;          // kMx, kNvfp4: square block x block blocks
  bool four_over_six = false;  // kNvfp4: each block scaled to 4 or 6, the lower block error wins
  ScaleRule mx_rule = ScaleRule::kFloor;  // kMx: the E8M0 scale rule (floor, ceil, even, rceil)
};

// An accumulation model as the recipe names it (a preset or a spec, written back into reports as
// given) and resolved once when the recipe is read.
struct AccumSpec {
  std::string spec = "fp32-seq";
  AccumModel model = default_model();

 private:
  // Parsed once: every default-constructed GemmSpec (three per Recipe) would parse it again.
  static const AccumModel& default_model() {
    static const AccumModel m = parse_accum_model("fp32-seq");
    return m;
  }
};
// The spec resolved (parse_accum_model: throws std::invalid_argument naming what is wrong).
inline AccumSpec accum_spec(std::string spec) {
  AccumModel m = parse_accum_model(spec);
  return {std::move(spec), std::move(m)};
}

// C = A B^T with both operands quantized along the reduction dimension K.
// forward: A = X (batch x in), B = W (out x in); dgrad: A = dY (batch x out), B = W^T (in x out);
// wgrad: A = dY^T (out x batch), B = X^T (in x batch).
struct GemmSpec {
  OperandSpec a, b;
  AccumSpec accum;
  // Random Hadamard transform of this size on both operands along K before they are quantized
  // (formats/hadamard.h); 0: none. Set from BlockRecipe::rht (the weight-gradient GEMM).
  int hadamard = 0;
};

// The switches of NVIDIA's NVFP4 training recipe (arXiv 2509.25149, Transformer Engine's
// NVFP4BlockScaling), Four Over Six (arXiv 2512.02010) and the MX scale rule. Each rewrites the
// operand specs it names when the recipe is resolved; rht, sr_gradients and four_over_six need an
// NVFP4 recipe, weights_2d an NVFP4 or MX one, mx_scale_rule other than floor an MX one.
struct BlockRecipe {
  bool rht = false;            // Hadamard transform of both weight-gradient GEMM operands along K
  int rht_size = 16;           // its size, a power of two dividing K
  bool weights_2d = false;     // weights (forward.b, dgrad.b) in 16x16 (NVFP4) or 32x32 (MX) blocks
  bool sr_gradients = false;   // gradient operands (dgrad.a, wgrad.a) stochastic, nearest otherwise
  bool four_over_six = false;  // every NVFP4 operand scaled to 4 or 6 per block
  ScaleRule mx_scale_rule = ScaleRule::kFloor;  // E8M0 rule of every MX operand: floor (OCP) | ceil | even | rceil (TE)
};

enum class LossScaleMode : uint8_t { kNone, kStatic, kDynamic };
struct LossScaling {
  LossScaleMode mode = LossScaleMode::kNone;
  double init_scale = 65536.0;  // PyTorch GradScaler defaults (reference 4.3)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

enum class UpdateRounding : uint8_t { kNearestEven, kStochastic, kKahan };

// Attention's numerics in a transformer (Transformer Engine keeps attention out of FP8 by default).
struct AttentionPrecision {
  // false ("high"): Q K^T and P V take operands plainly cast to the activations' format; true
  // ("recipe"): they use the recipe's gemm specs as linear layers do (FP8 in an FP8 recipe).
  bool products_in_recipe = false;
  TensorFormat scores;      // Q K^T and the softmax probabilities as stored (preset: the activations' format)
  bool low_opmath = false;  // softmax and LayerNorm round every intermediate to the activations' format
};

struct Recipe;
// A named part of the model with its own recipe keys (recipe_parts.h): the name as written ("0",
// "-1", "*", "embedding", "blocks.*.mlp", ...), a preset whose per-layer keys it takes first, and
// the keys it sets (bits of part_key_table(), part_keys.h) with their values: the fields of
// `values` those bits name (its other fields are never read). Applied by apply_part.
struct RecipePart {
  std::string name;
  std::optional<std::string> preset;
  uint64_t keys = 0;
  std::shared_ptr<const Recipe> values;
};
// Same name, preset and keys, and the same value of every key (part_keys.cpp).
bool operator==(const RecipePart& a, const RecipePart& b);

// Layers kept in BF16 whatever the recipe (NVIDIA's NVFP4 recipe keeps its last layers in BF16):
// the last ceil(fraction x layers) layers, or the listed ones (negative: from the end).
struct KeepBf16Layers {
  double fraction = 0;
  std::vector<int> layers;
  bool any() const { return fraction > 0 || !layers.empty(); }
};
// The nvfp4 preset's fraction: arXiv 2509.25149 keeps 16% of the 12B model's blocks in BF16 (the
// first 2 and the last 8 of 62); "mostly at the end" becomes the last ceil(0.16 x layers).
inline constexpr double kNvfp4KeepBf16 = 0.16;

struct Recipe {
  std::string name = "fp32";
  std::string preset = "fp32";
  TensorFormat weights;
  // The copy the optimizer updates (rounded to nearest); none ("none" in JSON): the optimizer
  // updates the stored weights directly.
  std::optional<TensorFormat> master_weights = TensorFormat{};
  UpdateRounding update_rounding = UpdateRounding::kNearestEven;
  TensorFormat activations;
  bool autocast = true;  // LayerNorm and the loss keep FP32 outputs (PyTorch autocast lists)
  TensorFormat activation_grads;
  TensorFormat weight_grads;
  TensorFormat optimizer_state;
  bool optimizer_state_scaled = false;  // per-tensor amax scaling of the state (FP8 states)
  GemmSpec forward, dgrad, wgrad;
  LossScaling loss_scaling;
  int amax_history_len = 1024;  // delayed scaling (TE default)
  int margin = 0;
  ParallelSpec parallel;          // W workers and the all-reduce
  AccumulationSpec accumulation;  // N micro-batches per worker
  AttentionPrecision attention;
  BlockRecipe block;
  std::vector<RecipePart> parts;  // per-part keys ("layers"), in name order
  KeepBf16Layers keep_bf16;       // "keep_bf16_layers"

  bool has_master() const { return master_weights.has_value(); }
};

// Whether any GEMM operand of the recipe uses this scaling.
bool uses_scaling(const Recipe& r, Scaling s);

// Rewrites the GEMM operand specs from r.block (2-D weight blocks, 4/6, the MX rule, the Hadamard
// size, gradient rounding). Throws std::invalid_argument naming the switch when it does not fit the
// recipe (rht on a recipe without NVFP4 operands, a Hadamard size that is not a power of two).
void apply_block_recipe(Recipe& r);
// In an NVFP4 recipe sr_gradients decides the gradient operands' rounding (after
// apply_block_recipe): a rounding given for dgrad.a or wgrad.a that differs contradicts it, and
// throws std::invalid_argument naming the key.
void check_gradient_roundings(const Recipe& r, std::optional<Rounding> dgrad_a, std::optional<Rounding> wgrad_a);

// A named preset: its builder and a one-line description (--help, --config-help and the docs are
// generated from the table).
struct RecipePreset {
  std::string_view name;
  Recipe (*build)();
  std::string_view doc;
};
// Every preset, in documentation order.
std::span<const RecipePreset> recipe_presets();
// Their names in the same order.
const std::vector<std::string>& recipe_preset_names();
// One line per preset, "  NAME  doc", aligned (for --help and --config-help).
std::string recipe_presets_doc();
// Throws std::invalid_argument naming the unknown preset and listing the known ones.
Recipe recipe_preset(std::string_view name);

// The MX scale rules a recipe may name (floor, ceil, even, rceil): the rule, or std::nullopt.
std::optional<ScaleRule> parse_mx_rule(std::string_view name);

}  // namespace precsim
#include "precsim/sim/train/recipe_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "precsim/sim/model/transformer.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/part_keys.h"

namespace precsim {
namespace {

// Slot layout of the transformer: 0 embedding, 1 + 3i block i, 2 + 3i its attention, 3 + 3i its
// MLP, 1 + 3L the head.
int tf_block_slot(int block) { return 1 + 3 * block; }

// A layer index as written ("2", "-1"), or nullopt when `s` is not an integer.
std::optional<int> parse_index(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size() || s.size() - i > 6) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  return std::stoi(s);
}

// A part name resolved: which layer it names (-1: every layer; the transformer's embedding and head
// have their own kinds) and which piece of a block.
struct PartName {
  enum Kind { kLayer, kEmbedding, kHead } kind = kLayer;
  int layer = -1;   // -1: "*"
  int piece = 0;    // transformer block: 0 whole block, 1 attention, 2 mlp
};

std::optional<PartName> parse_part(const std::string& name, bool transformer, int layers) {
  auto index = [&](const std::string& s) -> std::optional<int> {
    if (s == "*") return -1;
    auto i = parse_index(s);
    if (!i || *i >= layers || *i < -layers) return std::nullopt;
    return *i < 0 ? *i + layers : *i;
  };
  if (!transformer) {
    auto i = index(name);
    if (!i) return std::nullopt;
    return PartName{PartName::kLayer, *i, 0};
  }
  if (name == "embedding") return PartName{PartName::kEmbedding, 0, 0};
  if (name == "head") return PartName{PartName::kHead, 0, 0};
  if (!name.starts_with("blocks.")) return std::nullopt;
  std::string rest = name.substr(7);
  int piece = 0;
  for (auto [suffix, p] : {std::pair{".attention", 1}, {".mlp", 2}})
    if (rest.ends_with(suffix)) {
      rest = rest.substr(0, rest.size() - std::string_view(suffix).size());
      piece = p;
    }
  auto i = index(rest);
  if (!i) return std::nullopt;
  return PartName{PartName::kLayer, *i, piece};
}

}  // namespace

// The fields of the groups in `bits` copied from donor: the same keys as role_patch names.
void take_roles(Recipe& r, const Recipe& d, uint32_t bits, bool for_part) {
  if (bits & kPartWeights) r.weights = d.weights, r.forward.b = d.forward.b, r.dgrad.b = d.dgrad.b;
  if (bits & kPartActivations) {
    r.activations = d.activations, r.attention = d.attention;
    r.forward.a = d.forward.a, r.wgrad.b = d.wgrad.b, r.forward.accum = d.forward.accum;
    if (!for_part) r.autocast = d.autocast;
  }
  if (bits & kPartActivationGrads) {
    r.activation_grads = d.activation_grads;
    r.dgrad.a = d.dgrad.a, r.wgrad.a = d.wgrad.a, r.dgrad.accum = d.dgrad.accum;
    if (!for_part) r.loss_scaling = d.loss_scaling;
  }
  if (bits & kPartWeightGrads) r.weight_grads = d.weight_grads, r.wgrad.accum = d.wgrad.accum;
  if (bits & kPartOptimizerState) r.optimizer_state = d.optimizer_state, r.optimizer_state_scaled = d.optimizer_state_scaled;
  if (bits & kPartMasterWeights) r.master_weights = d.master_weights, r.update_rounding = d.update_rounding;
  if (bits & kPartGradAccumulation) {
    r.accumulation.buffer_format_name = d.accumulation.buffer_format_name;
    r.accumulation.buffer_format = d.accumulation.buffer_format;
    r.accumulation.rounding = d.accumulation.rounding;
  }
  if (bits & kPartAllReduce) {
    r.parallel.algorithm = d.parallel.algorithm, r.parallel.average = d.parallel.average, r.parallel.hook = d.parallel.hook;
    r.parallel.format_name = d.parallel.format_name, r.parallel.format = d.parallel.format;
  }
  if (bits & kPartForward) r.forward = d.forward;
  if (bits & kPartDgrad) r.dgrad = d.dgrad;
  if (bits & kPartWgrad) r.wgrad = d.wgrad;
}

// The NVFP4 switches act on operands: where a mix has given those operands the donor's format, a
// switch keeps acting only on what is still NVFP4 (MX), so that a restored operand is the donor's
// exactly (no transform, no stochastic rounding left on it), and an operand taken from an NVFP4
// donor keeps the rounding it had there.
namespace {

void keep_block_switches_on_their_operands(Recipe& r) {
  const OperandSpec* ops[] = {&r.forward.a, &r.forward.b, &r.dgrad.a, &r.dgrad.b, &r.wgrad.a, &r.wgrad.b};
  const bool nv = std::ranges::any_of(ops, [](const OperandSpec* o) { return o->scaling == Scaling::kNvfp4; });
  const bool mx = std::ranges::any_of(ops, [](const OperandSpec* o) { return o->scaling == Scaling::kMx; });
  BlockRecipe& b = r.block;
  b.rht = b.rht && (r.wgrad.a.scaling == Scaling::kNvfp4 || r.wgrad.b.scaling == Scaling::kNvfp4);
  // sr_gradients sets the gradient operands' rounding: it follows what the mix gave them.
  auto stochastic_nv = [](const OperandSpec& a) {
    return a.scaling == Scaling::kNvfp4 && a.fmt.rounding == Rounding::kStochastic;
  };
  b.sr_gradients = stochastic_nv(r.dgrad.a) || stochastic_nv(r.wgrad.a);
  b.four_over_six = b.four_over_six && nv;
  b.weights_2d = b.weights_2d && (nv || mx);
  if (!mx) b.mx_scale_rule = ScaleRule::kFloor;
}

}  // namespace

void resolve_mixed(Recipe& r) {
  keep_block_switches_on_their_operands(r);
  const Rounding dgrad_a = r.dgrad.a.fmt.rounding, wgrad_a = r.wgrad.a.fmt.rounding;
  apply_block_recipe(r);
  check_gradient_roundings(r, dgrad_a, wgrad_a);
  check_instruction_gemms(r);
}

Recipe mix_recipe(const Recipe& base, const Recipe& donor, uint32_t bits) {
  Recipe r = base;
  take_roles(r, donor, bits, false);
  resolve_mixed(r);
  return r;
}

RecipePart part_from_roles(std::string name, const Recipe& donor, uint32_t bits) {
  auto values = std::make_shared<Recipe>(donor);
  values->parts.clear();
  return {std::move(name), std::nullopt, part_keys_of_roles(bits), std::move(values)};
}

Recipe apply_part(const Recipe& base, const RecipePart& part) {
  try {
    Recipe r = base;
    r.parts.clear();
    if (part.preset) take_roles(r, recipe_preset(*part.preset), kLayerParts, true);
    if (part.keys) copy_part_keys(r, *part.values, part.keys);
    // A part given other operands (keep_bf16_layers on nvfp4: bf16) keeps the NVFP4 switches only
    // where its operands are still NVFP4 (MX). A part's keys never bring back its preset's kept
    // layers (nvfp4's): keep_bf16 stays the base's.
    resolve_mixed(r);
    return r;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("layers." + part.name + ": " + e.what());
  }
}

std::string valid_part_names(bool transformer, int layers) {
  if (!transformer) return fmt::format("layer indices 0..{} (or -{}..-1 from the end) and \"*\"", layers - 1, layers);
  return fmt::format(
      "embedding, head, blocks.I, blocks.I.attention, blocks.I.mlp with I in 0..{} (or -{}..-1 from the end) or *",
      layers - 1, layers);
}

std::vector<int> keep_bf16_selection(const KeepBf16Layers& k, int layers) {
  std::vector<int> out;
  if (k.fraction > 0) {
    const int n = std::clamp(int(std::ceil(k.fraction * layers - 1e-9)), 1, layers);
    for (int i = layers - n; i < layers; ++i) out.push_back(i);
  }
  for (int i : k.layers) {
    if (i >= layers || i < -layers)
      throw std::invalid_argument(fmt::format("keep_bf16_layers: layer {} is out of range; the model has {} layers (0..{}, or -{}..-1)",
                                              i, layers, layers - 1, layers));
    out.push_back(i < 0 ? i + layers : i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

PartRecipes::PartRecipes(const Recipe& base, bool transformer, int layers) : transformer_(transformer), layers_(layers) {
  if (base.parts.empty() && !base.keep_bf16.any()) return;
  const int n = transformer ? 2 + 3 * layers : layers;
  // Parts per slot and precedence (0 keep_bf16, 1 "*", 2 index, 3 blocks.*.piece, 4 blocks.I.piece).
  std::vector<std::map<int, const RecipePart*>> patches(static_cast<size_t>(n));
  auto add = [&](int slot, int level, const RecipePart& part) {
    auto [it, fresh] = patches[size_t(slot)].emplace(level, &part);
    if (!fresh)
      throw std::invalid_argument(fmt::format("recipe '{}': layers '{}' and '{}' name the same part", base.name,
                                              it->second->name, part.name));
  };
  const RecipePart bf16{"keep_bf16_layers", "bf16-amp", 0, nullptr};
  for (int l : keep_bf16_selection(base.keep_bf16, layers)) {
    if (!transformer) add(l, 0, bf16);
    else
      for (int piece = 0; piece < 3; ++piece) add(tf_block_slot(l) + piece, 0, bf16);
  }
  for (const RecipePart& p : base.parts) {
    const auto name = parse_part(p.name, transformer, layers);
    if (!name)
      throw std::invalid_argument(fmt::format("recipe '{}': layers has no part '{}' in this model; valid: {}", base.name,
                                              p.name, valid_part_names(transformer, layers)));
    if (name->kind == PartName::kEmbedding) add(0, 2, p);
    else if (name->kind == PartName::kHead) add(n - 1, 2, p);
    else
      for (int l = 0; l < layers; ++l) {
        if (name->layer >= 0 && name->layer != l) continue;
        const int level = name->piece == 0 ? (name->layer < 0 ? 1 : 2) : (name->layer < 0 ? 3 : 4);
        if (!transformer) add(l, level, p);
        else if (name->piece == 0)
          for (int piece = 0; piece < 3; ++piece) add(tf_block_slot(l) + piece, level, p);
        else add(tf_block_slot(l) + name->piece, level, p);
      }
  }
  Recipe plain = base;
  plain.parts.clear();
  plain.keep_bf16 = {};
  recipes_.assign(size_t(n), plain);
  ranges.assign(size_t(n), {});
  for (int s = 0; s < n; ++s)
    for (const auto& [level, part] : patches[size_t(s)]) recipes_[size_t(s)] = apply_part(recipes_[size_t(s)], *part);
}

std::string PartRecipes::slot_name(int slot) const {
  if (!transformer_) return std::to_string(slot);
  if (slot == 0) return "embedding";
  if (slot == 1 + 3 * layers_) return "head";
  const int b = (slot - 1) / 3, piece = (slot - 1) % 3;
  return fmt::format("blocks.{}{}", b, piece == 0 ? "" : piece == 1 ? ".attention" : ".mlp");
}

int PartRecipes::gemm_slot(int layer, int site) const {
  if (!transformer_) return std::clamp(layer, 0, layers_ - 1);
  switch (static_cast<TfSite>(site)) {
    case TfSite::kQkv:
    case TfSite::kProj:
    case TfSite::kScores:
    case TfSite::kAttnV: return tf_block_slot(layer) + 1;
    case TfSite::kFc:
    case TfSite::kFcProj: return tf_block_slot(layer) + 2;
    default: return 1 + 3 * layers_;
  }
}

int PartRecipes::round_slot(int layer) const {
  if (!transformer_) return std::clamp(layer, 0, layers_ - 1);
  if (layer < 0) return 0;
  if (layer >= layers_) return 1 + 3 * layers_;
  return tf_block_slot(layer);
}

}  // namespace precsim

#include "precsim/sim/train/recipe_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {
namespace {

using nlohmann::json;

// Keys of the recipe that exist once per model.
const char* const kGlobalKeys[] = {"master_weights", "update_rounding", "optimizer_state", "loss_scaling",
                                   "amax_history_len", "margin", "parallel", "accumulation", "layers",
                                   "keep_bf16_layers", "autocast"};

void set_path(json& out, const json& from, std::initializer_list<const char*> path) {
  const json* src = &from;
  json* dst = &out;
  for (const char* k : path) {
    src = &src->at(k);
    dst = &(*dst)[k];
  }
  *dst = *src;
}

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

json role_patch(const Recipe& donor, uint32_t bits, bool for_part) {
  const json d = recipe_keys_json(donor);
  json p = json::object();
  auto take = [&](uint32_t bit, std::initializer_list<std::initializer_list<const char*>> paths) {
    if (bits & bit)
      for (auto path : paths) set_path(p, d, path);
  };
  take(kPartWeights, {{"weights"}, {"gemm", "forward", "b"}, {"gemm", "dgrad", "b"}});
  take(kPartActivations, {{"activations"}, {"attention"}, {"gemm", "forward", "a"}, {"gemm", "wgrad", "b"},
                          {"gemm", "forward", "accum"}});
  take(kPartActivationGrads, {{"activation_grads"}, {"gemm", "dgrad", "a"}, {"gemm", "wgrad", "a"},
                              {"gemm", "dgrad", "accum"}});
  take(kPartWeightGrads, {{"weight_grads"}, {"gemm", "wgrad", "accum"}});
  take(kPartOptimizerState, {{"optimizer_state"}});
  take(kPartMasterWeights, {{"master_weights"}, {"update_rounding"}});
  take(kPartGradAccumulation, {{"accumulation", "buffer_format"}, {"accumulation", "rounding"}});
  take(kPartAllReduce, {{"parallel", "allreduce", "algorithm"}, {"parallel", "allreduce", "format"},
                        {"parallel", "allreduce", "average"}, {"parallel", "allreduce", "hook"}});
  take(kPartForward, {{"gemm", "forward"}});
  take(kPartDgrad, {{"gemm", "dgrad"}});
  take(kPartWgrad, {{"gemm", "wgrad"}});
  if (!for_part && (bits & kPartActivationGrads)) p["loss_scaling"] = d["loss_scaling"];
  if (!for_part && (bits & kPartActivations)) p["autocast"] = d["autocast"];
  return p;
}

namespace {

// The NVFP4 switches act on operands: where a mix has given those operands the donor's format, a
// switch keeps acting only on what is still NVFP4 (MX), so that a restored operand is the donor's
// exactly (no transform, no stochastic rounding left on it), and an operand taken from an NVFP4
// donor keeps the rounding it had there.
void keep_block_switches_on_their_operands(json& j) {
  auto scaling = [&](const char* pass, const char* side) { return j["gemm"][pass][side].value("scaling", ""); };
  bool nv = false, mx = false;
  for (const char* pass : {"forward", "dgrad", "wgrad"})
    for (const char* side : {"a", "b"}) nv |= scaling(pass, side) == "nvfp4", mx |= scaling(pass, side) == "mx";
  const auto off_unless = [&](const char* key, bool keep) {
    if (j.contains(key) && !keep) j[key] = false;
  };
  off_unless("rht", scaling("wgrad", "a") == "nvfp4" || scaling("wgrad", "b") == "nvfp4");
  // sr_gradients sets the gradient operands' rounding: it follows what the mix gave them.
  auto stochastic_nv = [&](const char* pass) {
    return scaling(pass, "a") == "nvfp4" && j["gemm"][pass]["a"].value("rounding", "") == "stochastic";
  };
  if (j.contains("sr_gradients")) j["sr_gradients"] = stochastic_nv("dgrad") || stochastic_nv("wgrad");
  off_unless("four_over_six", nv);
  off_unless("weights_2d", nv || mx);
  if (j.contains("mx_scale_rule") && !mx) j["mx_scale_rule"] = "floor";
}

}  // namespace

Recipe mix_recipe(const Recipe& base, const Recipe& donor, uint32_t bits) {
  json j = recipe_keys_json(base);
  j.merge_patch(role_patch(donor, bits));
  keep_block_switches_on_their_operands(j);
  Recipe r = recipe_from_json(j, base.name);
  r.parts = base.parts;
  r.keep_bf16 = base.keep_bf16;
  return r;
}

void check_part_keys(const json& patch, const std::string& where) {
  for (const auto& [key, v] : patch.items())
    for (const char* g : kGlobalKeys)
      if (key == g)
        throw std::invalid_argument(fmt::format(
            "{}: recipe key '{}' exists once per model and cannot be set for a part; a part may set: preset, weights, "
            "activations, activation_grads, weight_grads, gemm, attention",
            where, key));
}

Recipe apply_part_patch(const Recipe& base, const json& patch, const std::string& where) {
  json j = recipe_keys_json(base);
  json keys = patch;
  try {
    if (keys.contains("preset")) {
      if (!keys["preset"].is_string()) throw std::invalid_argument("key 'preset': expected a string");
      j.merge_patch(role_patch(recipe_preset(keys["preset"].get<std::string>()), kLayerParts, true));
      keys.erase("preset");
    }
    check_config_patch(j, keys, "", "recipe");
    j.merge_patch(keys);
    // A part given other operands (keep_bf16_layers on nvfp4: bf16) keeps the NVFP4 switches only
    // where its operands are still NVFP4 (MX).
    keep_block_switches_on_their_operands(j);
    Recipe r = recipe_from_json(j, base.name);
    r.name = base.name;
    r.keep_bf16 = base.keep_bf16;  // a part's keys never bring back its preset's kept layers (nvfp4's)
    return r;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
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
  // Patches per slot and precedence (0 keep_bf16, 1 "*", 2 index, 3 blocks.*.piece, 4 blocks.I.piece).
  std::vector<std::map<int, std::pair<std::string, json>>> patches(static_cast<size_t>(n));
  auto add = [&](int slot, int level, const std::string& name, const json& patch) {
    auto [it, fresh] = patches[size_t(slot)].emplace(level, std::pair{name, patch});
    if (!fresh)
      throw std::invalid_argument(fmt::format("recipe '{}': layers '{}' and '{}' name the same part", base.name,
                                              it->second.first, name));
  };
  const json bf16 = {{"preset", "bf16-amp"}};
  for (int l : keep_bf16_selection(base.keep_bf16, layers)) {
    if (!transformer) add(l, 0, "keep_bf16_layers", bf16);
    else
      for (int piece = 0; piece < 3; ++piece) add(tf_block_slot(l) + piece, 0, "keep_bf16_layers", bf16);
  }
  for (const RecipePart& p : base.parts) {
    const auto name = parse_part(p.name, transformer, layers);
    if (!name)
      throw std::invalid_argument(fmt::format("recipe '{}': layers has no part '{}' in this model; valid: {}", base.name,
                                              p.name, valid_part_names(transformer, layers)));
    const json patch = json::parse(p.patch);
    if (name->kind == PartName::kEmbedding) add(0, 2, p.name, patch);
    else if (name->kind == PartName::kHead) add(n - 1, 2, p.name, patch);
    else
      for (int l = 0; l < layers; ++l) {
        if (name->layer >= 0 && name->layer != l) continue;
        const int level = name->piece == 0 ? (name->layer < 0 ? 1 : 2) : (name->layer < 0 ? 3 : 4);
        if (!transformer) add(l, level, p.name, patch);
        else if (name->piece == 0)
          for (int piece = 0; piece < 3; ++piece) add(tf_block_slot(l) + piece, level, p.name, patch);
        else add(tf_block_slot(l) + name->piece, level, p.name, patch);
      }
  }
  Recipe plain = base;
  plain.parts.clear();
  plain.keep_bf16 = {};
  recipes_.assign(size_t(n), plain);
  ranges.assign(size_t(n), {});
  for (int s = 0; s < n; ++s)
    for (const auto& [level, named] : patches[size_t(s)])
      recipes_[size_t(s)] = apply_part_patch(recipes_[size_t(s)], named.second, "layers." + named.first);
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

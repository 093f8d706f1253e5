// The recipe's JSON edge: a config's recipe object read into a resolved Recipe (every format,
// accumulation model and scale rule resolved here, named by its key when it is wrong) and written
// back as the object reports hold.
#include "precsim/sim/train/recipe_json.h"

#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/train/part_keys.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/parallel/split_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <nlohmann/json.hpp>

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

std::string_view update_name(UpdateRounding u) {
  switch (u) {
    case UpdateRounding::kNearestEven: return "nearest-even";
    case UpdateRounding::kStochastic: return "stochastic";
    case UpdateRounding::kKahan: return "kahan";
  }
  return "?";
}

std::string_view mode_name(LossScaleMode m) {
  switch (m) {
    case LossScaleMode::kNone: return "none";
    case LossScaleMode::kStatic: return "static";
    case LossScaleMode::kDynamic: return "dynamic";
  }
  return "?";
}

json tf_json(const TensorFormat& t) { return {{"format", t.name}, {"rounding", to_string(t.rounding)}}; }
json operand_json(const OperandSpec& o) {
  json j = tf_json(o.fmt);
  j["scaling"] = to_string(o.scaling);
  j["block"] = o.block;
  return j;
}
json gemm_json(const GemmSpec& g) {
  return {{"a", operand_json(g.a)}, {"b", operand_json(g.b)}, {"accum", g.accum.spec}};
}

TensorFormat tf_from(const json& j, const std::string& where) {
  TensorFormat t;
  t.name = j.at("format").get<std::string>();
  std::string err;
  auto f = parse_format(t.name, &err);
  if (!f) throw std::invalid_argument(where + ".format: " + err);
  t.format = *f;
  try {
    t.rounding = parse_rounding(j.at("rounding").get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ".rounding: " + e.what());
  }
  return t;
}

OperandSpec operand_from(const json& j, const std::string& where) {
  OperandSpec o;
  o.fmt = tf_from(j, where);
  try {
    o.scaling = parse_scaling(j.at("scaling").get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ".scaling: " + e.what());
  }
  o.block = j.at("block").get<int>();
  if (o.scaling != Scaling::kNone && o.scaling != Scaling::kTensorCurrent && o.scaling != Scaling::kTensorDelayed &&
      (o.block < 1 || o.block > 4096))
    throw std::invalid_argument(fmt::format("{}.block {} is out of range for scaling {}; allowed: 1..4096", where,
                                            o.block, to_string(o.scaling)));
  return o;
}

json attention_json(const AttentionPrecision& a) {
  return {{"products", a.products_in_recipe ? "recipe" : "high"},
          {"scores", tf_json(a.scores)},
          {"opmath", a.low_opmath ? "low" : "fp32"}};
}

AttentionPrecision attention_from(const json& j) {
  AttentionPrecision a;
  const std::string p = j.at("products").get<std::string>(), o = j.at("opmath").get<std::string>();
  if (p != "high" && p != "recipe")
    throw std::invalid_argument(fmt::format("attention.products '{}' is unknown; allowed: high, recipe", p));
  if (o != "fp32" && o != "low") throw std::invalid_argument(fmt::format("attention.opmath '{}' is unknown; allowed: fp32, low", o));
  a.products_in_recipe = p == "recipe";
  a.low_opmath = o == "low";
  a.scores = tf_from(j.at("scores"), "attention.scores");
  return a;
}

GemmSpec gemm_from(const json& j, const std::string& where) {
  GemmSpec g{operand_from(j.at("a"), where + ".a"), operand_from(j.at("b"), where + ".b")};
  g.accum.spec = j.at("accum").get<std::string>();
  try {
    g.accum.model = parse_accum_model(g.accum.spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ".accum: " + e.what());
  }
  return g;
}

std::optional<TensorFormat> master_from(const std::string& name) {
  if (name == "none") return std::nullopt;
  std::string err;
  auto f = parse_format(name, &err);
  if (!f) throw std::invalid_argument("master_weights: " + err + " (or 'none')");
  return TensorFormat{name, Rounding::kNearestEven, *f};
}

ScaleRule mx_rule_from(const std::string& name, const std::string& recipe) {
  if (auto rule = parse_mx_rule(name)) return *rule;
  throw std::invalid_argument(
      fmt::format("recipe '{}': mx_scale_rule '{}' is unknown; allowed: floor, ceil, even, rceil", recipe, name));
}

UpdateRounding update_rounding_from(const std::string& u) {
  if (u == "nearest-even") return UpdateRounding::kNearestEven;
  if (u == "stochastic") return UpdateRounding::kStochastic;
  if (u == "kahan") return UpdateRounding::kKahan;
  throw std::invalid_argument(fmt::format("update_rounding '{}' is unknown; allowed: nearest-even, stochastic, kahan", u));
}

LossScaling loss_scaling_from(const json& ls) {
  LossScaling l;
  const std::string m = ls["mode"].get<std::string>();
  if (m == "none") l.mode = LossScaleMode::kNone;
  else if (m == "static") l.mode = LossScaleMode::kStatic;
  else if (m == "dynamic") l.mode = LossScaleMode::kDynamic;
  else throw std::invalid_argument(fmt::format("loss_scaling.mode '{}' is unknown; allowed: none, static, dynamic", m));
  l.init_scale = ls["init_scale"].get<double>();
  l.growth_factor = ls["growth_factor"].get<double>();
  l.backoff_factor = ls["backoff_factor"].get<double>();
  l.growth_interval = ls["growth_interval"].get<int>();
  if (!(l.init_scale > 0)) throw std::invalid_argument("loss_scaling.init_scale must be > 0");
  if (!(l.growth_factor > 1)) throw std::invalid_argument("loss_scaling.growth_factor must be > 1 (as GradScaler asserts)");
  if (!(l.backoff_factor < 1 && l.backoff_factor > 0))
    throw std::invalid_argument("loss_scaling.backoff_factor must be in (0, 1) (as GradScaler asserts)");
  if (l.growth_interval < 1) throw std::invalid_argument("loss_scaling.growth_interval must be >= 1");
  return l;
}

BlockRecipe block_from(const json& m, const std::string& recipe) {
  BlockRecipe b;
  b.rht = m["rht"].get<bool>();
  b.rht_size = m["rht_size"].get<int>();
  b.weights_2d = m["weights_2d"].get<bool>();
  b.sr_gradients = m["sr_gradients"].get<bool>();
  b.four_over_six = m["four_over_six"].get<bool>();
  b.mx_scale_rule = mx_rule_from(m["mx_scale_rule"].get<std::string>(), recipe);
  return b;
}

// The rounding a config gives a gradient operand (gemm.PASS.a.rounding), when it gives one.
std::optional<Rounding> given_rounding(const json& patch, const char* pass) {
  const json::json_pointer at(std::string("/gemm/") + pass + "/a/rounding");
  if (!patch.contains(at)) return std::nullopt;
  return parse_rounding(patch[at].get<std::string>());
}

}  // namespace

nlohmann::json recipe_to_json(const Recipe& r) {
  json j = recipe_keys_json(r);
  if (!r.parts.empty()) {
    json parts = json::object();
    for (const RecipePart& p : r.parts) parts[p.name] = part_to_json(p);
    j["layers"] = parts;
  }
  if (r.keep_bf16.fraction > 0) j["keep_bf16_layers"] = r.keep_bf16.fraction;
  if (!r.keep_bf16.layers.empty()) j["keep_bf16_layers"] = r.keep_bf16.layers;
  // A preset that keeps layers in BF16 (nvfp4) read back without the key would keep them again.
  if (!r.keep_bf16.any() && std::ranges::count(recipe_preset_names(), r.preset) && recipe_preset(r.preset).keep_bf16.any())
    j["keep_bf16_layers"] = 0;
  return j;
}

namespace {

// "layers" and "keep_bf16_layers" of a recipe object, checked for shape; part keys are checked
// against base (formats and names of keys), part names against a model when one is built.
void parts_from_json(Recipe& r, const json& j, const Recipe& base) {
  if (j.contains("layers")) {
    const json& l = j["layers"];
    if (!l.is_object()) throw std::invalid_argument("recipe key 'layers': expected an object {part name: {recipe keys}}");
    for (const auto& [name, patch] : l.items()) {
      const std::string where = "layers." + name;
      if (!patch.is_object()) throw std::invalid_argument(where + ": expected an object of recipe keys");
      check_part_keys(patch, where);
      RecipePart part = part_from_json(name, patch, base);
      apply_part(base, part);  // refuses keys that contradict each other on this recipe
      r.parts.push_back(std::move(part));
    }
  }
  if (j.contains("keep_bf16_layers")) {
    const json& k = j["keep_bf16_layers"];
    r.keep_bf16 = {};  // replaces the preset's (nvfp4 keeps 16%): 0 or [] keeps none
    if (k.is_number()) {
      r.keep_bf16.fraction = k.get<double>();
      if (!(r.keep_bf16.fraction >= 0 && r.keep_bf16.fraction <= 1))
        throw std::invalid_argument(fmt::format("keep_bf16_layers {} is out of range; allowed: a fraction in [0, 1] (0: none) or a list of layer indices", k.dump()));
    } else if (k.is_array()) {
      for (const auto& e : k) {
        if (!e.is_number_integer()) throw std::invalid_argument("keep_bf16_layers: expected layer indices (integers), got " + e.dump());
        r.keep_bf16.layers.push_back(e.get<int>());
      }
    } else {
      throw std::invalid_argument("keep_bf16_layers: expected a fraction in [0, 1] or a list of layer indices, got " + k.dump());
    }
  }
}

}  // namespace

nlohmann::json recipe_keys_json(const Recipe& r) {
  return {{"preset", r.preset},
          {"weights", tf_json(r.weights)},
          {"master_weights", r.master_weights ? r.master_weights->name : "none"},
          {"update_rounding", update_name(r.update_rounding)},
          {"activations", tf_json(r.activations)},
          {"autocast", r.autocast},
          {"activation_grads", tf_json(r.activation_grads)},
          {"weight_grads", tf_json(r.weight_grads)},
          {"optimizer_state", {{"format", r.optimizer_state.name},
                               {"rounding", to_string(r.optimizer_state.rounding)},
                               {"scaled", r.optimizer_state_scaled}}},
          {"gemm", {{"forward", gemm_json(r.forward)}, {"dgrad", gemm_json(r.dgrad)}, {"wgrad", gemm_json(r.wgrad)}}},
          {"loss_scaling", {{"mode", mode_name(r.loss_scaling.mode)},
                            {"init_scale", r.loss_scaling.init_scale},
                            {"growth_factor", r.loss_scaling.growth_factor},
                            {"backoff_factor", r.loss_scaling.backoff_factor},
                            {"growth_interval", r.loss_scaling.growth_interval}}},
          {"amax_history_len", r.amax_history_len},
          {"margin", r.margin},
          {"parallel", parallel_to_json(r.parallel)},
          {"accumulation", accumulation_to_json(r.accumulation)},
          {"attention", attention_json(r.attention)},
          {"rht", r.block.rht},
          {"rht_size", r.block.rht_size},
          {"weights_2d", r.block.weights_2d},
          {"sr_gradients", r.block.sr_gradients},
          {"four_over_six", r.block.four_over_six},
          {"mx_scale_rule", to_string(r.block.mx_scale_rule)}};
}

Recipe recipe_fields_from_json(const nlohmann::json& merged, const Recipe& start) {
  Recipe r = start;
  r.weights = tf_from(merged["weights"], "weights");
  r.master_weights = master_from(merged["master_weights"].get<std::string>());
  r.update_rounding = update_rounding_from(merged["update_rounding"].get<std::string>());
  r.activations = tf_from(merged["activations"], "activations");
  r.autocast = merged["autocast"].get<bool>();
  r.activation_grads = tf_from(merged["activation_grads"], "activation_grads");
  r.weight_grads = tf_from(merged["weight_grads"], "weight_grads");
  r.optimizer_state = tf_from(merged["optimizer_state"], "optimizer_state");
  r.optimizer_state_scaled = merged["optimizer_state"]["scaled"].get<bool>();
  r.forward = gemm_from(merged["gemm"]["forward"], "gemm.forward");
  r.dgrad = gemm_from(merged["gemm"]["dgrad"], "gemm.dgrad");
  r.wgrad = gemm_from(merged["gemm"]["wgrad"], "gemm.wgrad");
  r.loss_scaling = loss_scaling_from(merged["loss_scaling"]);
  r.amax_history_len = merged["amax_history_len"].get<int>();
  if (r.amax_history_len < 1) throw std::invalid_argument("amax_history_len must be >= 1");
  r.margin = merged["margin"].get<int>();
  r.parallel = parallel_from_json(merged["parallel"]);
  r.accumulation = accumulation_from_json(merged["accumulation"]);
  r.attention = attention_from(merged["attention"]);
  r.block = block_from(merged, r.name);
  return r;
}

Recipe recipe_from_json(const nlohmann::json& j, std::string_view default_name) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("recipe '{}': expected an object", default_name));
  std::string preset(default_name);
  if (j.contains("preset")) {
    if (!j["preset"].is_string()) throw std::invalid_argument("recipe key 'preset': expected a string");
    preset = j["preset"].get<std::string>();
  }
  Recipe start = recipe_preset(preset);
  start.name = std::string(default_name);
  json merged = recipe_keys_json(start);
  json keys = j;
  keys.erase("layers");
  keys.erase("keep_bf16_layers");
  check_config_patch(merged, keys, "", "recipe");
  merged.merge_patch(keys);
  Recipe r = recipe_fields_from_json(merged, start);
  apply_block_recipe(r);
  check_gradient_roundings(r, given_rounding(j, "dgrad"), given_rounding(j, "wgrad"));
  check_instruction_gemms(r);
  parts_from_json(r, j, r);
  return r;
}

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

void check_part_keys(const json& patch, const std::string& where) {
  for (const auto& [key, v] : patch.items())
    for (const char* g : kGlobalKeys)
      if (key == g)
        throw std::invalid_argument(fmt::format(
            "{}: recipe key '{}' exists once per model and cannot be set for a part; a part may set: preset, weights, "
            "activations, activation_grads, weight_grads, gemm, attention",
            where, key));
}

RecipePart part_from_json(const std::string& name, const json& patch, const Recipe& base) {
  const std::string where = "layers." + name;
  try {
    RecipePart part{name};
    json keys = patch;
    Recipe start = base;
    start.parts.clear();
    if (keys.contains("preset")) {
      if (!keys["preset"].is_string()) throw std::invalid_argument("key 'preset': expected a string");
      part.preset = keys["preset"].get<std::string>();
      recipe_preset(*part.preset);  // names the known presets when it is not one
      keys.erase("preset");
    }
    json j = recipe_keys_json(start);
    check_config_patch(j, keys, "", "recipe");
    j.merge_patch(keys);
    part.values = std::make_shared<const Recipe>(recipe_fields_from_json(j, start));
    const auto table = part_key_table();
    for (size_t i = 0; i < table.size(); ++i) {
      std::string pointer;
      for (const auto& k : table[i].path) pointer += "/" + k;
      if (keys.contains(json::json_pointer(pointer))) part.keys |= uint64_t{1} << i;
    }
    return part;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

json part_to_json(const RecipePart& part) {
  json p = json::object();
  if (part.preset) p["preset"] = *part.preset;
  if (!part.keys) return p;
  const json d = recipe_keys_json(*part.values);
  const auto table = part_key_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (!(part.keys >> i & 1)) continue;
    const json* src = &d;
    json* dst = &p;
    for (const auto& k : table[i].path) src = &src->at(k), dst = &(*dst)[k];
    *dst = *src;
  }
  return p;
}

std::string recipe_keys_doc() {
  return std::string(R"(recipe keys (every key optional; unspecified keys come from the preset):
  preset            one of the preset names; default: the recipe's own name
  weights           {format, rounding}: compute copy of the weights, cast from the master copy each step
  master_weights    format of the copy the optimizer updates, or "none" (weights updated in place)
  update_rounding   nearest-even | stochastic | kahan: how an update is rounded into the stored weights
  activations       {format, rounding}: outputs of linear layers and activation functions
  autocast          true: LayerNorm and the loss keep FP32 outputs (PyTorch autocast lists)
  activation_grads  {format, rounding}: gradients between ops, the scaled loss gradient included
  weight_grads      {format, rounding}: parameter gradients as produced by the backward pass
  optimizer_state   {format, rounding, scaled}: momentum / Adam moments; scaled: per-tensor amax scale
  gemm.{forward,dgrad,wgrad}.{a,b}  {format, rounding, scaling, block}: GEMM operands; scaling is
                    none | tensor-current | tensor-delayed | rowwise | block2d | mx | nvfp4
  gemm.{forward,dgrad,wgrad}.accum  accumulation model of the GEMM (fp32-seq)
  loss_scaling      {mode: none|static|dynamic, init_scale, growth_factor, backoff_factor, growth_interval}
  amax_history_len  delayed scaling window (TE default 1024)
  margin            delayed/current scaling margin: scale = fmt_max / amax / 2^margin
  attention.products  transformers: high (Q K^T and P V in the activations' format, no scaling;
                    Transformer Engine's default) | recipe (the gemm specs above, FP8 in FP8 recipes)
  attention.scores  {format, rounding}: Q K^T and the softmax probabilities as stored (preset: activations)
  attention.opmath  fp32 | low: softmax and LayerNorm intermediates rounded to the activations' format
  rht               NVFP4: random Hadamard transform of both weight-gradient GEMM operands along the
                    reduction dimension, signs from the run's seed shared by all layers (nvfp4: true)
  rht_size          its size, a power of two dividing the tokens of a micro-batch (16)
  weights_2d        NVFP4 / MX: weights in 16x16 / 32x32 blocks, the same quantized weight in the
                    forward and backward pass (nvfp4: true)
  sr_gradients      NVFP4: stochastic rounding of the gradient operands (dgrad.a, wgrad.a), nearest
                    rounding of the others (nvfp4, nvfp4-plain: true)
  four_over_six     NVFP4: each block scaled so its max maps to 4 or 6, the lower squared error wins
                    (arXiv 2512.02010)
  mx_scale_rule     MX: floor (OCP, mxfp8-ocp) | ceil | even | rceil (Transformer Engine, mxfp8)
  layers            {part: {recipe keys}}: keys for named parts of the model (per-layer keys only:
                    weights, activations, activation_grads, weight_grads, gemm, attention, preset:
                    that preset's per-layer keys). MLP: layer index ("0", "-1": the last) or "*";
                    transformer: embedding, head, blocks.I, blocks.*, blocks.I.attention,
                    blocks.I.mlp, blocks.*.attention, blocks.*.mlp (I may be negative); the more
                    general name applies first. blocks.I.attention and blocks.I.mlp reach those
                    products (gemm, attention), their weights and weight gradients; the tensors a block stores
                    (activations, gradients) follow blocks.I
  keep_bf16_layers  a fraction of the layers (the last ceil(fraction x layers)) or a list of layer
                    indices (MLP layers, transformer blocks) that take bf16-amp's per-layer keys;
                    0 or []: none (nvfp4: 0.16, as arXiv 2509.25149 keeps 16% of its blocks)
)") + split_keys_doc();
}

}  // namespace precsim

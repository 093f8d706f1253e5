#include "precsim/sim/train/recipe.h"

#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/recipe_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <nlohmann/json.hpp>

namespace precsim {
namespace {

using nlohmann::json;

TensorFormat tf(std::string name, Rounding r = Rounding::kNearestEven) {
  TensorFormat t;
  t.name = std::move(name);
  t.rounding = r;
  t.format = format_by_name(t.name);
  return t;
}

OperandSpec op(std::string name, Scaling s = Scaling::kNone, int block = 0,
               Rounding r = Rounding::kNearestEven) {
  return OperandSpec{tf(std::move(name), r), s, block};
}

GemmSpec gemm(OperandSpec a, OperandSpec b) { return GemmSpec{std::move(a), std::move(b), "fp32-seq"}; }

void all_gemms(Recipe& r, const std::string& f) {
  r.forward = gemm(op(f), op(f));
  r.dgrad = gemm(op(f), op(f));
  r.wgrad = gemm(op(f), op(f));
}

// Autocast mixed precision: FP32 master weights and optimizer, 16-bit compute copies, GEMM inputs,
// op outputs and gradients.
Recipe fp32_recipe();
Recipe amp(const std::string& f) {
  Recipe r = fp32_recipe();
  r.weights = tf(f);
  r.activations = tf(f);
  r.activation_grads = tf(f);
  r.weight_grads = tf(f);
  r.attention.scores = tf(f);
  all_gemms(r, f);
  return r;
}

Recipe pure_bf16(UpdateRounding u) {
  Recipe r = amp("bf16");
  r.master_weights = "none";
  r.update_rounding = u;
  r.autocast = false;
  r.optimizer_state = tf("bf16");
  return r;
}

// Block-scaled GEMMs on top of BF16 autocast: only the linear layers' operands change
// (docs/SOURCES.md §3.7: everything else stays in high precision).
Recipe scaled(const std::string& fwd, const std::string& bwd, Scaling s, int block,
              Rounding grad_rounding = Rounding::kNearestEven) {
  Recipe r = amp("bf16");
  r.forward = gemm(op(fwd, s, block), op(fwd, s, block));
  r.dgrad = gemm(op(bwd, s, block, grad_rounding), op(fwd, s, block));
  r.wgrad = gemm(op(bwd, s, block, grad_rounding), op(fwd, s, block));
  return r;
}

// Every tensor role in FP32: the base the presets change.
Recipe fp32_recipe() {
  Recipe r;
  r.weights = r.activations = r.activation_grads = r.weight_grads = r.optimizer_state = tf("fp32");
  r.attention.scores = tf("fp32");
  r.master_format = format_by_name("fp32");
  all_gemms(r, "fp32");
  return r;
}

Recipe build_preset(std::string_view n) {
  Recipe r = fp32_recipe();
  if (n == "fp32") {
  } else if (n == "bf16-amp") {
    r = amp("bf16");
  } else if (n == "fp16-amp") {
    r = amp("fp16");
    r.loss_scaling.mode = LossScaleMode::kDynamic;
  } else if (n == "fp16-amp-static") {
    r = amp("fp16");
    r.loss_scaling.mode = LossScaleMode::kStatic;
    r.loss_scaling.init_scale = 1024.0;
  } else if (n == "fp16-noscale") {
    r = amp("fp16");
  } else if (n == "bf16-pure") {
    r = pure_bf16(UpdateRounding::kNearestEven);
  } else if (n == "bf16-pure-sr") {
    r = pure_bf16(UpdateRounding::kStochastic);
  } else if (n == "bf16-pure-kahan") {
    r = pure_bf16(UpdateRounding::kKahan);
  } else if (n == "fp8-delayed") {
    r = scaled("e4m3", "e5m2", Scaling::kTensorDelayed, 0);  // TE HYBRID
  } else if (n == "fp8-current") {
    r = scaled("e4m3", "e5m2", Scaling::kTensorCurrent, 0);
  } else if (n == "fp8-blockwise") {
    r = scaled("e4m3", "e4m3", Scaling::kRowwise, 128);  // 1x128 activations and gradients
    r.forward.b.scaling = Scaling::kBlock2d;             // 128x128 weights
    r.dgrad.b.scaling = Scaling::kBlock2d;
  } else if (n == "mxfp8" || n == "mxfp8-ocp") {
    r = scaled("e4m3", "e4m3", Scaling::kMx, 32);  // TE MXFP8BlockScaling: E4M3 everywhere
    r.block.mx_scale_rule = n == "mxfp8" ? "rceil" : "floor";  // TE rounds the scale up; OCP floors
  } else if (n == "mxfp6") {
    r = scaled("e2m3", "e3m2", Scaling::kMx, 32);
  } else if (n == "mxfp4") {
    r = scaled("e2m1", "e2m1", Scaling::kMx, 32);
  } else if (n == "nvfp4" || n == "nvfp4-plain") {
    r = scaled("e2m1", "e2m1", Scaling::kNvfp4, 16, Rounding::kStochastic);
    r.block.sr_gradients = true;
    // The published recipe (arXiv 2509.25149 §4): RHT on the weight-gradient GEMM, 16x16 weights,
    // and about 16% of the layers in BF16, mostly the last (the 12B model: the first 2 and last 8
    // of 62 blocks). Here the last ceil(0.16 x layers): tiny-gpt's last block of 2.
    r.block.rht = r.block.weights_2d = n == "nvfp4";
    if (n == "nvfp4") r.keep_bf16.fraction = kNvfp4KeepBf16;
  } else if (n == "ddp8-bf16-ring" || n == "ddp8-bf16-tree" || n == "ddp8-bf16-fp32acc") {
    // BF16 autocast, 8 workers summing BF16 buckets as NCCL does (docs/SOURCES.md TC 4.1).
    r = amp("bf16");
    r.parallel.workers = 8;
    r.parallel.format_name = "bf16";
    r.parallel.format = r.activations.format;
    r.parallel.algorithm = parse_allreduce_algorithm(n == "ddp8-bf16-fp32acc" ? "fp32-accumulate" : n.substr(10));
  } else if (n == "accum16-bf16-buffer" || n == "accum16-bf16-sr" || n == "accum16-bf16-kahan") {
    // BF16 autocast with 16 micro-batches summed in a BF16 buffer (reference 5.2, 5.3).
    r = amp("bf16");
    r.accumulation.micro_batches = 16;
    r.accumulation.buffer_format_name = "bf16";
    r.accumulation.buffer_format = r.activations.format;
    r.accumulation.rounding = n.ends_with("sr")      ? BufferRounding::kStochastic
                              : n.ends_with("kahan") ? BufferRounding::kKahan
                                                     : BufferRounding::kNearestEven;
  } else if (n == "ddp8-bn-local" || n == "ddp8-bn-sync") {
    // FP32, 8 workers: BatchNorm statistics per worker, or SyncBatchNorm across the 8.
    r.parallel.workers = 8;
    r.parallel.batchnorm = n.ends_with("sync") ? BatchNormStats::kSync : BatchNormStats::kWorker;
  } else if (n == "accum-hf-bug") {
    // FP32, 4 micro-batches, loss averaged per micro-batch (the Hugging Face Trainer bug, reference 5.1).
    r.accumulation.micro_batches = 4;
    r.accumulation.normalization = LossNormalization::kMeanPerMicroBatch;
  } else {
    std::string known;
    for (const auto& k : recipe_preset_names()) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument(fmt::format("unknown recipe '{}'; known recipes: {}", n, known));
  }
  r.name = r.preset = std::string(n);
  r.master_format = format_by_name("fp32");
  apply_block_recipe(r);
  return r;
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
json gemm_json(const GemmSpec& g) { return {{"a", operand_json(g.a)}, {"b", operand_json(g.b)}, {"accum", g.accum}}; }

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
  GemmSpec g{operand_from(j.at("a"), where + ".a"), operand_from(j.at("b"), where + ".b"), j.at("accum").get<std::string>()};
  return g;
}

// In an NVFP4 recipe sr_gradients decides the gradient operands' rounding; a config that also sets
// one of them to something else contradicts it.
void check_gradient_rounding(const Recipe& r, const json& patch) {
  if (!uses_scaling(r, Scaling::kNvfp4)) return;
  for (const auto& [pass, spec] : {std::pair<const char*, const GemmSpec*>{"dgrad", &r.dgrad}, {"wgrad", &r.wgrad}}) {
    const json::json_pointer at(std::string("/gemm/") + pass + "/a/rounding");
    if (patch.contains(at) && patch[at].get<std::string>() != to_string(spec->a.fmt.rounding))
      throw std::invalid_argument(fmt::format(
          "recipe '{}': gemm.{}.a.rounding '{}' contradicts sr_gradients {} (which makes it {}); set sr_gradients instead",
          r.name, pass, patch[at].get<std::string>(), r.block.sr_gradients, to_string(spec->a.fmt.rounding)));
  }
}

}  // namespace

std::string_view to_string(Role r) {
  static constexpr std::string_view kNames[] = {"weights",     "master_weights",   "activations",
                                                "gemm_in_forward", "gemm_in_dgrad", "gemm_in_wgrad",
                                                "activation_grads", "weight_grads", "optimizer_state",
                                                "grad_accumulation", "allreduce"};
  return kNames[static_cast<int>(r)];
}

std::string_view to_string(Scaling s) {
  switch (s) {
    case Scaling::kNone: return "none";
    case Scaling::kTensorCurrent: return "tensor-current";
    case Scaling::kTensorDelayed: return "tensor-delayed";
    case Scaling::kRowwise: return "rowwise";
    case Scaling::kBlock2d: return "block2d";
    case Scaling::kMx: return "mx";
    case Scaling::kNvfp4: return "nvfp4";
  }
  return "?";
}

Scaling parse_scaling(std::string_view s) {
  for (Scaling v : {Scaling::kNone, Scaling::kTensorCurrent, Scaling::kTensorDelayed, Scaling::kRowwise,
                    Scaling::kBlock2d, Scaling::kMx, Scaling::kNvfp4})
    if (s == to_string(v)) return v;
  throw std::invalid_argument(fmt::format(
      "unknown scaling '{}'; allowed: none, tensor-current, tensor-delayed, rowwise, block2d, mx, nvfp4", s));
}

const std::vector<std::string>& recipe_preset_names() {
  static const std::vector<std::string> kNames = {
      "fp32",         "bf16-amp",      "fp16-amp",    "fp16-amp-static", "fp16-noscale",
      "bf16-pure",    "bf16-pure-sr",  "bf16-pure-kahan", "fp8-delayed", "fp8-current",
      "fp8-blockwise", "mxfp8",        "mxfp8-ocp",   "mxfp6",           "mxfp4",
      "nvfp4",        "nvfp4-plain",
      "ddp8-bf16-ring", "ddp8-bf16-tree", "ddp8-bf16-fp32acc", "accum16-bf16-buffer", "accum16-bf16-sr",
      "accum16-bf16-kahan", "accum-hf-bug", "ddp8-bn-local", "ddp8-bn-sync"};
  return kNames;
}

Recipe recipe_preset(std::string_view name) { return build_preset(name); }

nlohmann::json recipe_to_json(const Recipe& r) {
  json j = recipe_keys_json(r);
  if (!r.parts.empty()) {
    json parts = json::object();
    for (const RecipePart& p : r.parts) parts[p.name] = json::parse(p.patch);
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
      apply_part_patch(base, patch, where);
      r.parts.push_back({name, patch.dump()});
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
          {"master_weights", r.master_weights},
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
          {"mx_scale_rule", r.block.mx_scale_rule}};
}

Recipe recipe_from_json(const nlohmann::json& j, std::string_view default_name) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("recipe '{}': expected an object", default_name));
  std::string preset(default_name);
  if (j.contains("preset")) {
    if (!j["preset"].is_string()) throw std::invalid_argument("recipe key 'preset': expected a string");
    preset = j["preset"].get<std::string>();
  }
  const Recipe base = build_preset(preset);
  json merged = recipe_keys_json(base);
  json keys = j;
  keys.erase("layers");
  keys.erase("keep_bf16_layers");
  check_config_patch(merged, keys, "", "recipe");
  merged.merge_patch(keys);
  Recipe r = base;
  r.name = std::string(default_name);
  r.weights = tf_from(merged["weights"], "weights");
  r.master_weights = merged["master_weights"].get<std::string>();
  if (r.has_master()) {
    std::string err;
    auto f = parse_format(r.master_weights, &err);
    if (!f) throw std::invalid_argument("master_weights: " + err + " (or 'none')");
    r.master_format = *f;
  }
  const std::string u = merged["update_rounding"].get<std::string>();
  if (u == "nearest-even") r.update_rounding = UpdateRounding::kNearestEven;
  else if (u == "stochastic") r.update_rounding = UpdateRounding::kStochastic;
  else if (u == "kahan") r.update_rounding = UpdateRounding::kKahan;
  else throw std::invalid_argument(fmt::format("update_rounding '{}' is unknown; allowed: nearest-even, stochastic, kahan", u));
  r.activations = tf_from(merged["activations"], "activations");
  r.autocast = merged["autocast"].get<bool>();
  r.activation_grads = tf_from(merged["activation_grads"], "activation_grads");
  r.weight_grads = tf_from(merged["weight_grads"], "weight_grads");
  r.optimizer_state = tf_from(merged["optimizer_state"], "optimizer_state");
  r.optimizer_state_scaled = merged["optimizer_state"]["scaled"].get<bool>();
  r.forward = gemm_from(merged["gemm"]["forward"], "gemm.forward");
  r.dgrad = gemm_from(merged["gemm"]["dgrad"], "gemm.dgrad");
  r.wgrad = gemm_from(merged["gemm"]["wgrad"], "gemm.wgrad");
  const auto& ls = merged["loss_scaling"];
  const std::string m = ls["mode"].get<std::string>();
  if (m == "none") r.loss_scaling.mode = LossScaleMode::kNone;
  else if (m == "static") r.loss_scaling.mode = LossScaleMode::kStatic;
  else if (m == "dynamic") r.loss_scaling.mode = LossScaleMode::kDynamic;
  else throw std::invalid_argument(fmt::format("loss_scaling.mode '{}' is unknown; allowed: none, static, dynamic", m));
  r.loss_scaling.init_scale = ls["init_scale"].get<double>();
  r.loss_scaling.growth_factor = ls["growth_factor"].get<double>();
  r.loss_scaling.backoff_factor = ls["backoff_factor"].get<double>();
  r.loss_scaling.growth_interval = ls["growth_interval"].get<int>();
  if (!(r.loss_scaling.init_scale > 0)) throw std::invalid_argument("loss_scaling.init_scale must be > 0");
  if (!(r.loss_scaling.growth_factor > 1)) throw std::invalid_argument("loss_scaling.growth_factor must be > 1 (as GradScaler asserts)");
  if (!(r.loss_scaling.backoff_factor < 1 && r.loss_scaling.backoff_factor > 0))
    throw std::invalid_argument("loss_scaling.backoff_factor must be in (0, 1) (as GradScaler asserts)");
  if (r.loss_scaling.growth_interval < 1) throw std::invalid_argument("loss_scaling.growth_interval must be >= 1");
  r.amax_history_len = merged["amax_history_len"].get<int>();
  if (r.amax_history_len < 1) throw std::invalid_argument("amax_history_len must be >= 1");
  r.margin = merged["margin"].get<int>();
  r.parallel = parallel_from_json(merged["parallel"]);
  r.accumulation = accumulation_from_json(merged["accumulation"]);
  r.attention = attention_from(merged["attention"]);
  r.block.rht = merged["rht"].get<bool>();
  r.block.rht_size = merged["rht_size"].get<int>();
  r.block.weights_2d = merged["weights_2d"].get<bool>();
  r.block.sr_gradients = merged["sr_gradients"].get<bool>();
  r.block.four_over_six = merged["four_over_six"].get<bool>();
  r.block.mx_scale_rule = merged["mx_scale_rule"].get<std::string>();
  apply_block_recipe(r);
  check_gradient_rounding(r, j);
  check_instruction_gemms(r);
  parts_from_json(r, j, r);
  return r;
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

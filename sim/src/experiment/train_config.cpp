// The train configuration: JSON in, fully resolved JSON out, every key documented.
#include <fmt/format.h>

#include <set>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/train/recipe_json.h"
#include "precsim/sim/data/data_json.h"
#include "precsim/sim/model/model_json.h"
#include "precsim/sim/train/optimizer_json.h"

namespace precsim {

using nlohmann::json;

std::string_view to_string(ModelKind k) { return k == ModelKind::kTransformer ? "transformer" : "mlp"; }

json train_config_to_json(const TrainConfig& c) {
  json recipes = json::array();
  for (const Recipe& r : c.variants) {
    json j = recipe_to_json(r);
    j["name"] = r.name;
    recipes.push_back(j);
  }
  return {{"steps", c.steps},
          {"batch", c.batch},
          {"seed", c.seed},
          {"seeds", c.seeds},
          {"shadow_every", c.shadow_every},
          {"log_every", c.log_every},
          {"eval_every", c.eval_every},
          {"divergence_factor", c.divergence_factor},
          {"histogram_steps", c.histogram_steps},
          {"data", c.model_type == ModelKind::kTransformer ? seq_data_config_to_json(c.seq_data) : data_config_to_json(c.data)},
          {"items", items_config_to_json(c.items)},
          {"model", c.model_type == ModelKind::kTransformer ? transformer_config_to_json(c.transformer) : mlp_config_to_json(c.model)},
          {"optimizer", optimizer_config_to_json(c.optimizer)},
          {"recipes", recipes}};
}

namespace {

// The recipes of a config: preset names, or objects {"name", "preset", overrides...}; names unique.
std::vector<Recipe> recipes_from_json(const json& list) {
  std::vector<Recipe> out;
  std::set<std::string> names;
  for (const auto& r : list) {
    Recipe rec;
    if (r.is_string()) {
      rec = recipe_preset(r.get<std::string>());
    } else if (r.is_object()) {
      if (!r.contains("name") || !r["name"].is_string())
        throw std::invalid_argument("a recipe object needs a string 'name' (and optionally 'preset' and overrides): " + r.dump());
      json o = r;
      const std::string name = o["name"];
      o.erase("name");
      // The name is the preset when none is given; errors then name the recipe as the config does.
      try {
        rec = recipe_from_json(o, name);
      } catch (const std::invalid_argument& e) {
        // A config holds several recipes: an error inside one says which.
        const std::string what = e.what(), tag = "recipe '" + name + "'";
        if (what.find(tag) != std::string::npos) throw;
        throw std::invalid_argument(tag + ": " + what);
      }
      rec.name = name;
    } else {
      throw std::invalid_argument("recipes: each entry is a preset name or an object, got " + r.dump());
    }
    if (!names.insert(rec.name).second) throw std::invalid_argument("recipes: the name '" + rec.name + "' appears twice");
    out.push_back(rec);
  }
  return out;
}

// The weight-gradient GEMM reduces over the tokens of one micro-batch of one worker (and, with
// attention products in the recipe, over the context): the Hadamard size must divide them.
void check_hadamard_divides(const Recipe& r, const TrainConfig& c) {
  const int n = r.wgrad.hadamard;
  if (!n) return;
  const bool tf = c.model_type == ModelKind::kTransformer;
  const int64_t rows = c.batch / (int64_t(r.parallel.workers) * r.accumulation.micro_batches);
  const int64_t tokens = rows * (tf ? c.transformer.context : 1);
  if (tokens % n != 0)
    throw std::invalid_argument(fmt::format(
        "recipe '{}': rht_size {} does not divide the weight-gradient GEMM's reduction dimension K = {} ({} rows per "
        "micro-batch{}); allowed: a power of two dividing K",
        r.name, n, tokens, rows, tf ? fmt::format(" x context {}", c.transformer.context) : ""));
  if (tf && r.attention.products_in_recipe && c.transformer.context % n != 0)
    throw std::invalid_argument(fmt::format("recipe '{}': rht_size {} does not divide the context {} over which the "
                                            "attention products (attention.products recipe) reduce",
                                            r.name, n, c.transformer.context));
}

}  // namespace

TrainConfig train_config_from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("config: expected a JSON object at the top level");
  TrainConfig c;
  json base = train_config_to_json(c);
  base.erase("data");
  base.erase("model");
  base.erase("optimizer");
  base.erase("items");
  base["items"] = json::object();
  base["data"] = json::object();
  base["model"] = json::object();
  base["optimizer"] = json::object();
  json top = j;
  for (const char* k : {"data", "items", "model", "optimizer"})
    if (top.contains(k) && !top[k].is_object()) throw std::invalid_argument(fmt::format("config key '{}': expected an object", k));
  // Sections are checked by their own parsers; here only the top-level keys and types.
  json shallow = top;
  for (const char* k : {"data", "items", "model", "optimizer"})
    if (shallow.contains(k)) shallow[k] = json::object();
  const json m = merge_config(base, shallow, "config");
  c.steps = m["steps"];
  c.batch = m["batch"];
  c.seed = m["seed"];
  c.seeds = m["seeds"];
  c.shadow_every = m["shadow_every"];
  c.log_every = m["log_every"];
  c.eval_every = m["eval_every"];
  c.divergence_factor = m["divergence_factor"];
  for (const auto& s : m["histogram_steps"]) {
    if (!s.is_number_integer()) throw std::invalid_argument("config key 'histogram_steps': expected integers, got " + s.dump());
    c.histogram_steps.push_back(s.get<int64_t>());
  }
  if (c.steps < 1) throw std::invalid_argument(fmt::format("steps {} must be >= 1", c.steps));
  if (c.batch < 1) throw std::invalid_argument(fmt::format("batch {} must be >= 1", c.batch));
  if (c.seeds < 1) throw std::invalid_argument(fmt::format("seeds {} must be >= 1", c.seeds));
  if (c.shadow_every < 0 || c.log_every < 0 || c.eval_every < 0)
    throw std::invalid_argument("shadow_every, log_every and eval_every must be >= 0");
  if (!(c.divergence_factor > 1)) throw std::invalid_argument("divergence_factor must be > 1");
  json model = top.value("model", json::object());
  if (model.contains("type") && !model["type"].is_string()) throw std::invalid_argument("model.type: expected a string (mlp or transformer)");
  const std::string type = model.value("type", "mlp");
  if (type == "transformer") {
    c.model_type = ModelKind::kTransformer;
    c.transformer = transformer_config_from_json(model);
    c.seq_data = seq_data_config_from_json(top.value("data", json::object()));
  } else if (type == "mlp") {
    c.model_type = ModelKind::kMlp;
    model.erase("type");
    c.data = data_config_from_json(top.value("data", json::object()));
    c.items = items_config_from_json(top.value("items", json::object()));
    c.model = mlp_config_from_json(model);
  } else {
    throw std::invalid_argument(fmt::format("model.type '{}' is unknown; allowed: mlp, transformer", type));
  }
  c.optimizer = optimizer_config_from_json(top.value("optimizer", json::object()));
  c.variants = recipes_from_json(m["recipes"]);
  if (c.variants.empty()) throw std::invalid_argument("recipes: give at least one recipe");
  for (const Recipe& r : c.variants) {
    check_split(r.parallel, r.accumulation, c.batch, r.name);
    check_hadamard_divides(r, c);
    if (r.parallel.batchnorm != BatchNormStats::kMicroBatch && !(c.model_type == ModelKind::kMlp && c.model.batchnorm))
      throw std::invalid_argument(fmt::format("recipe '{}': parallel.batchnorm_stats {} needs BatchNorm layers (model.batchnorm true)",
                                              r.name, to_string(r.parallel.batchnorm)));
  }
  return c;
}

std::string train_config_doc() {
  return std::string(R"(precsim train configuration (JSON; every key optional, unknown keys are errors)
  steps               optimizer steps (default 300)
  batch               rows per step: the global batch, split by each recipe's parallel.workers x
                      accumulation.micro_batches (which must divide it); the reference takes it whole (64)
  seed                seed of the data, the initial weights, the batch order and stochastic rounding (1)
  seeds               repeat the whole experiment for seed, seed+1, ... and report mean and 95% interval (1)
  shadow_every        period of the local-error shadow steps; 0: none (10)
  log_every           period of the per-step series; 0: at most 200 points (0)
  eval_every          period of held-out evaluations; 0: ten evaluations (0)
  divergence_factor   a variant stops at a non-finite loss or a loss above factor x the reference's
                      loss that is also above the initial loss (10)
  histogram_steps     steps at which gradient exponent histograms are taken; []: first and last
  data.kind           gaussian-mixture | teacher-student | npy
  data.features, data.classes, data.train_size, data.heldout_size   sizes (32, 10, 4096, 1024)
  data.separation, data.noise       gaussian-mixture: std-dev of class means / of points (2, 1)
  data.outputs, data.teacher_hidden, data.target_scale, data.label_noise   teacher-student (1, 32, 1, 0)
  data.features_path, data.labels_path, data.heldout_fraction   npy: (N,F) float features; (N) int
                      class labels (data.classes) or (N[,O]) float targets; trailing fraction held out (0.2)
                      relative paths in a --config file are relative to that file (as data.text_path)
                      paths without data.kind mean kind npy; values must be finite (the first
                      NaN or Inf is named by row and column)
  items.mask_fraction rows whose items are all masked (weight 0) (0)
  items.min_per_row, items.max_per_row   items of an unmasked row, keyed uniform integer; the loss is
                      sum items x row loss / items, so unequal counts tell the normalisations apart (1, 1)
  model.type          mlp | transformer (mlp); the keys below are the MLP's, then the transformer's
  model.hidden        hidden widths ([64, 64])
  model.activation    relu | gelu (tanh form)
  model.layernorm     LayerNorm before each activation (false)
  model.batchnorm     BatchNorm there instead (false): training-mode statistics as each recipe's
                      parallel.batchnorm_stats says (default: over the rows of each forward, i.e. per
                      micro-batch of each worker; sync: SyncBatchNorm); the reference normalises over
                      the whole batch; evaluation uses running statistics (momentum 0.1) updated by
                      worker 0's micro-batches, or by the global statistics under sync
  model.residual      h = x + act(...) where widths agree (false)
  model.init_scale    weights ~ N(0, init_scale^2 / fan_in) (1)
  transformer (model.type transformer; data then describes token sequences):
  model.layers, heads, width, context, mlp_ratio   blocks, attention heads, C (a multiple of heads),
                      the longest sequence T, MLP width / C (2, 2, 32, 32, 4)
  model.tied          output projection = token embedding (true)
  model.init_scale    linear weights ~ N(0, init_scale^2 / fan_in), embeddings ~ N(0, (0.1 init_scale)^2) (1)
  model.qk_init_scale extra factor on the query and key weights: large values give large attention logits (1)
  model.outlier_scale the first MLP product's input at position 0 of every sequence is multiplied by
                      this: an injected massive activation (1: none)
  model.outlier_layer the one block that gets it (-1: every block)
  data.kind           copy | reverse | sort | modadd ((sum of the items) mod symbols) | text (--text FILE)
  data.symbols        synthetic tokens 0..symbols-1, then SEP and PAD (10)
  data.min_length, data.max_length   items per synthetic problem, keyed uniform (2, 8); padded to context
  data.train_size, data.heldout_size   problems, or text windows of context + 1 characters (2048, 256)
  data.text_path      text: a file read as bytes; its distinct bytes are the vocabulary, the last tenth
                      is held out. The loss is the mean over counted target tokens of the whole batch;
                      batch counts sequences, and a split recipe's items are the counted tokens
  optimizer.kind      sgd | adamw (adamw)
  optimizer.lr, momentum, beta1, beta2, eps, weight_decay   (1e-3, 0.9, 0.9, 0.999, 1e-8, 0)
  optimizer.clip_norm global gradient-norm clipping after unscaling; 0: off
  optimizer.warmup_steps, cosine, min_lr_ratio   linear warm-up, cosine decay to min_lr_ratio x lr
  recipes             list of preset names or objects {"name": ..., "preset": ..., overrides}
)") + recipe_keys_doc() + "\n";
}

}  // namespace precsim

// precsim train: the FP64 reference and any number of precision recipes side by side.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "gpu_cli.h"
#include "precsim/sim/hw/gpu_train.h"
#include "train_runner.h"

namespace precsim::cli {
namespace {

struct Args {
  ExperimentArgs e;  // --config, --experiment, --steps, --seed, --seeds, --threads, --out, ...
  std::string text;
  std::string recipes;
  int batch = 0;
  bool config_help = false;
  std::string jsonl;
  std::string backend = "emulated";
  int device = 0;
};

// --backend cuda: every variant's matrix products also on cuBLASLt (gpu_train.h). Refuses, before
// any step, a transformer, a missing device (exit 3) and a recipe the device cannot run (exit 2).
TrainTwin cuda_twin(const TrainConfig& c, int device) {
  if (c.model_type == ModelKind::kTransformer)
    throw UsageError("--backend cuda runs the MLP only; model.type transformer has its matrix products emulated");
  const auto gpu = load_gpu_library();
  const GpuSystemInfo sys = system_or_throw(*gpu);
  const PrecsimGpuDevice& dev = device_or_throw(sys, device);
  for (const Recipe& r : c.variants)
    if (!r.parts.empty() || r.keep_bf16.any())
      throw UsageError("--backend cuda runs one recipe per model; recipe '" + r.name +
                       "' has per-part keys (layers, keep_bf16_layers), which the device GEMMs do not follow");
  try {
    for (const Recipe& r : c.variants) check_cuda_recipe(r, dev);
  } catch (const GpuError& e) {
    rethrow(e);
  }
  TrainTwin b;
  b.info = {{"name", "cuda"}, {"device", device}, {"system", system_json(sys)}};
  b.info.update(cuda_train_choices_json());
  b.make = [gpu, dev](const Recipe& r) { return std::make_shared<CublasGemmExecutor>(gpu, dev, r); };
  return b;
}

// The preset names, comma-separated (the full table with a line each is in --config-help).
std::string preset_list() {
  std::string names;
  for (const auto& n : recipe_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

void run(const Args& a) {
  if (a.config_help) {
    std::cout << train_config_doc();
    std::cout << "recipe presets:\n" << recipe_presets_doc();
    return;
  }
  nlohmann::json j = config_or_experiment(a.e.config, a.e.experiment);
  if (!a.text.empty()) {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || j["model"].value("type", "") != "transformer")
      throw UsageError("--text '" + a.text + "' needs a transformer (model.type \"transformer\" in --config, or --experiment tiny-gpt)");
    j["data"]["kind"] = "text";
    j["data"]["text_path"] = a.text;
  }
  if (!j.is_object()) throw UsageError("--config '" + a.e.config + "': expected a JSON object");
  if (!a.recipes.empty()) {
    nlohmann::json list = nlohmann::json::array();
    std::stringstream ss(a.recipes);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) list.push_back(item);
    j["recipes"] = list;
  }
  if (!j.contains("recipes")) {
    // The other keys first: a misspelt "recipes" is then named as an unknown key.
    nlohmann::json probe = j;
    probe["recipes"] = {"fp32"};
    parse_train_config(probe, a.e.config.empty() ? "train" : "--config '" + a.e.config + "'");
    throw UsageError("no recipes: give --recipes a,b,c or \"recipes\" in --config; presets: " + preset_list());
  }
  if (a.e.steps > 0) j["steps"] = a.e.steps;
  if (a.e.seed >= 0) j["seed"] = a.e.seed;
  if (a.e.seeds > 0) j["seeds"] = a.e.seeds;
  if (a.batch > 0) j["batch"] = a.batch;
  const TrainConfig c = parse_train_config(j, a.e.config.empty() ? "train" : "--config '" + a.e.config + "'");
  if (a.backend == "cuda") check_output(a.e.out);
  run_train_report(c, a.e.out, a.jsonl, a.backend == "cuda" ? cuda_twin(c, a.device) : TrainTwin{});
}

const Registrar reg(60, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "train an MLP or a transformer in an FP64 reference and precision recipes side by side");
  auto a = std::make_shared<Args>();
  add_experiment_options(cmd, a->e);
  cmd->add_option("--text", a->text, "train a transformer character by character on this text file");
  cmd->add_option("--recipes", a->recipes,
                  "comma-separated recipe presets, listed below (overrides the config's list)");
  cmd->add_option("--batch", a->batch, "rows per step")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--backend", a->backend,
                  "emulated (default) | cuda: also run each MLP variant with its matrix products on cuBLASLt, from "
                  "the same weights and batches, and report the per-step differences (exit 3 without a GPU)")
      ->check(CLI::IsMember({"emulated", "cuda"}));
  cmd->add_option("--device", a->device, "CUDA device index for --backend cuda")->check(CLI::Range(0, 1023));
  cmd->add_flag("--config-help", a->config_help, "print every configuration key and the recipe presets");
  add_jsonl_option(cmd, a->jsonl);
  // The presets with what each does, so that --recipes can be chosen from --help alone.
  cmd->footer("Recipe presets (--recipes):\n" + recipe_presets_doc());
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

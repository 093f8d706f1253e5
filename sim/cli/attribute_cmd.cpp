// precsim attribute: which tensor role, GEMM pass, layer or layer x role of a recipe costs the
// loss, by leave-one-out and leave-one-in reruns in lockstep with the reference
// (precsim/sim/experiment/attribution.h).
#include <nlohmann/json.hpp>

#include "cli_parse.h"
#include "precsim/sim/experiment/attribution.h"
#include "train_runner.h"

namespace precsim::cli {
namespace {

struct Args {
  ExperimentArgs e;
  std::string recipe;
  std::string unit = "role";
  std::string units;
  std::string metric = "heldout_loss";
};

// The recipe to explain: a recipe of the config's list by name, else a preset name.
Recipe find_recipe(const TrainConfig& c, const std::string& name) {
  for (const Recipe& r : c.variants)
    if (r.name == name) return r;
  try {
    return recipe_preset(name);
  } catch (const std::invalid_argument& e) {
    std::string listed;
    for (const Recipe& r : c.variants) listed += (listed.empty() ? "" : ", ") + r.name;
    throw UsageError("--recipe '" + name + "' is neither a recipe of the config (" + (listed.empty() ? "none" : listed) +
                     ") nor a preset: " + e.what());
  }
}

void run(const Args& a) {
  if (a.recipe.empty()) throw UsageError("--recipe: give the recipe to explain (a name in the config's recipes, or a preset)");
  const TrainConfig c = experiment_config(a.e, nlohmann::json::array({"fp32"}), false, "attribute");
  const std::vector<std::string> only = split_list(a.units);
  check_output(a.e.out);
  const Recipe recipe = find_recipe(c, a.recipe);
  run_experiment_report("attribute", c, [&] { return recipe; },
                        {{"recipe", recipe.name}, {"unit", a.unit}, {"units", only}, {"metric", a.metric}}, a.e.out,
                        [&](const TrainConfig& one, const RunHooks& hooks) {
                          return run_attribution(one, recipe, attribution_units(one, a.unit, only), a.unit, a.metric, hooks);
                        });
}

const Registrar reg(62, [](CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "attribute", "which role, GEMM pass, layer or layer x role of a recipe costs the loss: leave-one-out and "
                   "leave-one-in reruns against FP32, in lockstep with the FP64 reference");
  auto a = std::make_shared<Args>();
  add_experiment_options(cmd, a->e);
  cmd->add_option("--recipe", a->recipe, "the recipe to explain: a name in the config's recipes, or a preset");
  cmd->add_option("--unit", a->unit, "role (default) | gemm | layer | layer-role");
  cmd->add_option("--units", a->units, "comma-separated units to run (default: every unit of the kind)");
  cmd->add_option("--metric", a->metric,
                  "what ranks the units: heldout_loss (default), final_loss, or local_grad_rel_err (the shadow step's "
                  "gradient error at the reference's weights, free of training drift)");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

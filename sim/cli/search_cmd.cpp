// precsim search: per-layer formats of weights and activations under a bit budget, the Pareto set
// of (cost, held-out loss change), each point as a recipe `precsim train` accepts
// (precsim/sim/experiment/recipe_search.h).
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/recipe_search.h"
#include "train_runner.h"

namespace precsim::cli {
namespace {

struct Args {
  ExperimentArgs e;
  std::string recipe = "bf16-amp";
  std::string formats;
  double budget = -1;
  std::string save_recipes;
};

// A train config that reruns every Pareto point: the search's experiment with the points' recipes.
void save_recipes(const std::string& path, const TrainConfig& c, const nlohmann::json& results) {
  nlohmann::json cfg = train_config_to_json(c);
  cfg["recipes"] = pareto_recipes(results);
  write_file_atomic(path, cfg.dump(2) + "\n");
  note() << "wrote " << path << " (" << cfg["recipes"].size() << " recipes: precsim train --config " << path << ")\n";
}

void run(const Args& a) {
  if (a.formats.empty()) throw UsageError("--formats: give the element formats to choose between, e.g. e2m1,e4m3,bf16");
  if (a.budget < 0) throw UsageError("--budget: give the average bits per weight and activation to reach, e.g. 6");
  const TrainConfig c = experiment_config(a.e, nlohmann::json::array({"fp32"}), true, "search");
  SearchOptions o;
  o.formats = split_list(a.formats);
  o.budget = a.budget;
  if (!a.save_recipes.empty()) check_destination("--save-recipes", a.save_recipes);
  nlohmann::json found;
  run_experiment_report("search", c, [&] { return recipe_preset(a.recipe); },
                        {{"recipe", a.recipe}, {"formats", o.formats}, {"budget", a.budget}, {"method", "greedy"}}, a.e.out,
                        [&](const TrainConfig& one, const RunHooks& hooks) { return found = run_search(one, one.variants[0], o, hooks); });
  if (!a.save_recipes.empty() && !found.is_null()) save_recipes(a.save_recipes, c, found);
}

const Registrar reg(63, [](CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "search", "per-layer formats of weights and activations under a bit budget: a greedy search from the highest "
                "format down, the Pareto set of (bits, held-out loss change), each point a recipe precsim train runs");
  auto a = std::make_shared<Args>();
  add_experiment_options(cmd, a->e);
  cmd->add_option("--recipe", a->recipe, "the preset the layers' formats are set on (default bf16-amp: BF16 gradients)");
  cmd->add_option("--formats,-f", a->formats, "element formats a layer may take, e.g. e2m1,e4m3,bf16 (8 bits or fewer: MX block scaling)");
  cmd->add_option("--budget", a->budget, "average bits per weight and activation, weighted by each layer's multiply-adds");
  cmd->add_option("--save-recipes", a->save_recipes,
                  "write the Pareto points' recipes, cheapest first, as a config precsim train --config runs");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

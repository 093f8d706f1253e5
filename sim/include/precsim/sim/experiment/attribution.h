// Which tensor costs the loss: counterfactual reruns of a recipe R against a high-precision
// recipe H (R with every role group in FP32, its split kept), all in one lockstep run with the FP64
// reference (same weights, batches and stochastic-rounding keys). Per unit u: leave-one-out (R with
// u taken from H: how much of the gap u causes) and leave-one-in (H with only u from R: what u
// alone costs). Definitions in docs/reference/metrics.md ("attribute").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/experiment/runner.h"

namespace precsim {

// One unit of attribution: a group of recipe keys (recipe_parts.h PartBits), over the whole model
// or for one part of it (`part`: a name of the recipe's "layers" key; empty: the whole model).
struct AttributionUnit {
  std::string name;  // "activations", "forward", "blocks.0", "0/weights", ...
  std::string part;
  uint32_t bits = 0;
};

// The units of a kind (role | gemm | layer | layer-role) for the config's model, restricted to
// `only` when it is not empty. Throws std::invalid_argument for an unknown kind or a name in
// `only` that is not a unit of that kind, listing the valid ones.
std::vector<AttributionUnit> attribution_units(const TrainConfig& c, const std::string& kind,
                                               const std::vector<std::string>& only = {});

// The high-precision recipe of R: R with every role group from the fp32 preset (split kept).
Recipe high_recipe(const Recipe& r);
// R with unit u from `donor` (a part's keys when u names a part).
Recipe with_unit(const Recipe& base, const Recipe& donor, const AttributionUnit& u);

// The recipes of c run as variants in one lockstep run, identical recipes run once. Returns per
// recipe (in order) and per seed {final_loss, heldout_loss, local_grad_rel_err}, and per seed the
// reference's chaos floor in loss (|chaos control's loss - reference's loss| at the last logged
// step, as report compare reads it). hooks as for run_training.
struct CounterfactualRuns {
  std::vector<std::vector<std::array<double, 3>>> metrics;  // [recipe][seed]{final, heldout, local}
  std::vector<double> chaos_loss;                            // [seed]
  std::vector<double> reference_heldout;                     // [seed]
  std::vector<std::vector<VariantSummary>> summaries;        // [recipe][seed]: its train summary
  int distinct = 0;                                          // recipes actually run
};
CounterfactualRuns run_counterfactuals(const TrainConfig& c, const std::vector<Recipe>& recipes, const RunHooks& hooks);

// The results of a `precsim attribute` report, units ranked by `metric` (heldout_loss, final_loss
// or local_grad_rel_err). Throws std::invalid_argument (before any step) for an unknown metric, a
// recipe with per-part keys or one equal to its high-precision recipe, and (after the runs) for a
// recipe whose gap in `metric` is indistinguishable from seed noise and the chaos floor.
nlohmann::json run_attribution(const TrainConfig& c, const Recipe& r, const std::vector<AttributionUnit>& units,
                               const std::string& kind, const std::string& metric = "heldout_loss",
                               const RunHooks& hooks = {});
// What run_attribution does in two halves, for counterfactual runs made elsewhere (precsim.torch):
// the recipes to run (0 R, 1 H, then per unit leave-one-out and leave-one-in; the same checks before
// any step), and the results from their runs' metrics (the same check after the runs).
std::vector<Recipe> attribution_plan(const Recipe& r, const std::vector<AttributionUnit>& units,
                                     const std::string& metric);
nlohmann::json attribution_results(const Recipe& r, const std::vector<AttributionUnit>& units, const std::string& kind,
                                   const std::string& metric, const CounterfactualRuns& runs);
// The ranked table of an attribute report's results.
std::string attribution_table(const nlohmann::json& results);

}  // namespace precsim

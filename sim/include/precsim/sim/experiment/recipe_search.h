// precsim search: per-layer format assignments of the weights and activations (the forward and
// weight-gradient products' weight and activation operands, and the stored tensors of those roles)
// under a cost model in bits, searched greedily from the all-highest assignment down, each round's
// candidates run in one lockstep run with the FP64 reference. Definitions in docs/reference/metrics.md
// ("search").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/experiment/runner.h"

namespace precsim {

struct SearchOptions {
  std::vector<std::string> formats;  // element formats; each is a choice for a layer
  double budget = 0;                 // average bits per weight and activation, MAC-weighted
};

// A layer's candidate format: element bits plus the block scale's bits per element.
struct SearchFormat {
  std::string name;
  double bits = 0;
};
// The formats of a search, from the highest cost down. Throws std::invalid_argument for an unknown
// format or fewer than two distinct ones.
std::vector<SearchFormat> search_formats(const std::vector<std::string>& names);
// The searched parts of the model (layers with matrix products) and their multiply-adds per row.
std::vector<std::pair<std::string, double>> search_parts(const TrainConfig& c);
// base with `part` computing its weights and activations in format f.
Recipe with_layer_format(const Recipe& base, const std::string& part, const SearchFormat& f);

// The results of a `precsim search` report. Throws std::invalid_argument (before any step) for a
// budget below the cheapest assignment, an unknown format, or a base recipe with per-part keys.
nlohmann::json run_search(const TrainConfig& c, const Recipe& base, const SearchOptions& o, const RunHooks& hooks = {});
// The Pareto table of a search report's results, cheapest first, with a legend and what it found.
std::string search_table(const nlohmann::json& results);
// The recipes of the Pareto points of a search report's results, cheapest first.
std::vector<nlohmann::json> pareto_recipes(const nlohmann::json& results);

}  // namespace precsim

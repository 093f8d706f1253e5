// The split of a recipe (parallel, accumulation) read from and written as JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/parallel/split.h"

namespace precsim {

nlohmann::json parallel_to_json(const ParallelSpec& p);
nlohmann::json accumulation_to_json(const AccumulationSpec& a);
// From a complete (defaults-merged) object; throws std::invalid_argument naming the key, the bad
// value and what is allowed.
ParallelSpec parallel_from_json(const nlohmann::json& j);
AccumulationSpec accumulation_from_json(const nlohmann::json& j);

}  // namespace precsim

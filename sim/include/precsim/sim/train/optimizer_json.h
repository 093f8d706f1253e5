// The optimizer section of a train configuration read from and written as JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/train/optimizer.h"

namespace precsim {

nlohmann::json optimizer_config_to_json(const OptimizerConfig& c);
// Strict: unknown keys, wrong types and out-of-range values throw std::invalid_argument.
OptimizerConfig optimizer_config_from_json(const nlohmann::json& j);

}  // namespace precsim

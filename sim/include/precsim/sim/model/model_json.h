// The model section of a train configuration (MLP or transformer) read from and written as JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/model/mlp.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {

nlohmann::json mlp_config_to_json(const MlpConfig& c);
MlpConfig mlp_config_from_json(const nlohmann::json& j);
nlohmann::json transformer_config_to_json(const TransformerConfig& c);
// Strict: unknown keys ("type" is allowed and must be "transformer") throw std::invalid_argument.
TransformerConfig transformer_config_from_json(const nlohmann::json& j);

}  // namespace precsim

// The data sections of a train configuration read from and written as JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/items.h"
#include "precsim/sim/data/seq_data.h"

namespace precsim {

nlohmann::json data_config_to_json(const DataConfig& c);
// Strict: unknown keys and wrong types throw std::invalid_argument listing the valid keys.
DataConfig data_config_from_json(const nlohmann::json& j);
nlohmann::json items_config_to_json(const ItemsConfig& c);
// Strict: unknown keys, wrong types, mask_fraction outside [0, 1), min < 1 or max < min throw
// std::invalid_argument naming the value.
ItemsConfig items_config_from_json(const nlohmann::json& j);
nlohmann::json seq_data_config_to_json(const SeqDataConfig& c);
// Strict: unknown keys and wrong types throw std::invalid_argument listing the valid keys.
SeqDataConfig seq_data_config_from_json(const nlohmann::json& j);

}  // namespace precsim

// An accumulation model as the JSON object a report holds (the {...} form of the spec grammar).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/accum/accum_model.h"

namespace precsim {

nlohmann::json to_json(const AccumModel& m);
AccumModel accum_model_from_json(const nlohmann::json& j);  // throws std::invalid_argument
// Every preset ("group": "preset") and every row of the instruction table ("group":
// "instruction", with its name pattern, operand types and MMA-Sim's parameters), as to_json gives them.
nlohmann::json accum_models_json();

}  // namespace precsim

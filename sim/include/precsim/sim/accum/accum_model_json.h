// An accumulation model as the JSON object a report holds (the {...} form of the spec grammar).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/accum/accum_model.h"

namespace precsim {

nlohmann::json to_json(const AccumModel& m);
AccumModel accum_model_from_json(const nlohmann::json& j);  // throws std::invalid_argument

}  // namespace precsim

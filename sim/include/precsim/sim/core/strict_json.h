// Strict configuration objects: a section's defaults, written as JSON, are the schema of what a
// user may override; any other key or a value of another type is an error naming it.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace precsim {

// Every key of `patch` must exist in `base` with the same JSON type (integers stay integers);
// objects recurse. Throws std::invalid_argument: "unknown <what> key 'a.b'; valid keys here: ...".
void check_config_patch(const nlohmann::json& base, const nlohmann::json& patch, const std::string& path,
                        const std::string& what);

// base with patch merged after check_config_patch.
nlohmann::json merge_config(nlohmann::json base, const nlohmann::json& patch, const std::string& what);

}  // namespace precsim

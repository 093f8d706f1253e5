#include "precsim/sim/core/strict_json.h"

#include <fmt/format.h>

#include <stdexcept>
#include <nlohmann/json.hpp>

namespace precsim {

void check_config_patch(const nlohmann::json& base, const nlohmann::json& patch, const std::string& path,
                        const std::string& what) {
  if (!patch.is_object())
    throw std::invalid_argument(fmt::format("{} '{}': expected an object, got {}", what, path, patch.dump()));
  for (const auto& [k, v] : patch.items()) {
    const std::string where = path.empty() ? k : path + "." + k;
    if (!base.contains(k)) {
      std::string valid;
      for (const auto& [bk, bv] : base.items()) valid += (valid.empty() ? "" : ", ") + bk;
      throw std::invalid_argument(fmt::format("unknown {} key '{}'; valid keys here: {}", what, where, valid));
    }
    const nlohmann::json& b = base.at(k);
    const bool same = (b.is_object() && v.is_object()) || (b.is_string() && v.is_string()) ||
                      (b.is_boolean() && v.is_boolean()) || (b.is_number() && v.is_number()) ||
                      (b.is_array() && v.is_array());
    if (!same)
      throw std::invalid_argument(fmt::format("{} key '{}': expected {}, got {}", what, where, b.type_name(), v.dump()));
    if (b.is_number_integer() && !v.is_number_integer())
      throw std::invalid_argument(fmt::format("{} key '{}': expected an integer, got {}", what, where, v.dump()));
    if (b.is_object()) check_config_patch(b, v, where, what);
  }
}

nlohmann::json merge_config(nlohmann::json base, const nlohmann::json& patch, const std::string& what) {
  check_config_patch(base, patch, "", what);
  base.merge_patch(patch);
  return base;
}

}  // namespace precsim

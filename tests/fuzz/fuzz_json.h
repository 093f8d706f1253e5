// Shared by the JSON fuzz targets: the bytes parsed as the CLI parses a file (nlohmann::json, no
// comments), without exceptions, so that a parse error (the CLI's "not valid JSON") ends the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>

namespace precsim_fuzz {

inline std::optional<nlohmann::json> parse_json_input(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace precsim_fuzz

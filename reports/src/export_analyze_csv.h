// Tidy CSV of an analyze report's tensors, for `report export --csv`: one column per metric and
// one row per item, where the generic export would spread every scheme and histogram bin of a
// tensor over one row (170+ columns for three schemes).
//   analyze_tensors.csv      one row per tensor: name, dtype, shape (AxB), counts
//   analyze_schemes.csv      one row per tensor and scheme: every scalar metric (window.* too)
//   analyze_exponents.csv    one row per tensor and binade of its values: exponent, count
//   analyze_scales.csv       one row per tensor, scheme and block-scale binade: exponent, count
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace precsim {

// True when `results` has the analyze shape (a `tensors` list of records with `schemes`); then
// calls write(name, text) for each file above.
bool export_analyze_csv(const nlohmann::json& results,
                        const std::function<void(const std::string&, const std::string&)>& write);

}  // namespace precsim

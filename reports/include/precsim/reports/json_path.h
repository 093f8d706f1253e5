// Dotted paths into a report ("results.formats.3.max_finite") and patterns over them, used by
// check rules, diff and export. In a pattern, a segment is a shell glob ('*', '?', '[a-z]') for
// one key or array index, and "**" matches any number of segments (zero included).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

std::vector<std::string> split_path(std::string_view path);
std::string join_path(const std::vector<std::string>& segments);
bool path_matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path);
bool path_matches(std::string_view pattern, std::string_view path);

// A number, or a string that reports use for numbers ("nan", "inf", "-inf", or a C99 hex-float
// such as "0x1.8p-24"). Integer codes ("0x3a") are not numbers.
bool is_numeric(const nlohmann::json& j);
double numeric_value(const nlohmann::json& j);  // throws std::invalid_argument when !is_numeric
// An array of two or more entries that are all numeric: a series or a vector of values.
bool is_numeric_array(const nlohmann::json& j);

// Exact equality: numbers by their double bits (so -0 differs from +0 and NaN from any number),
// integers by value, everything else as JSON.
bool json_identical(const nlohmann::json& a, const nlohmann::json& b);

// Calls `leaf(path, value)` for every scalar, and every numeric array when `series_as_leaf`, in
// document order.
void for_each_leaf(const nlohmann::json& j, const std::string& prefix, bool series_as_leaf,
                   const std::function<void(const std::string&, const nlohmann::json&)>& leaf);

// `path` with each array index that selects a named object spelt as that name, for people:
// "results.variants.3.summary.loss" -> "results.variants[fp8-delayed].summary.loss" (the key
// "name", "scheme" or "model" of the element in `doc`), "results.runs.0" -> "results.runs[seed=4]".
// Text after the first space (" (final)") is kept; a path `doc` does not hold is returned as given.
std::string readable_path(const nlohmann::json& doc, const std::string& path);
// Short text of a scalar for tables and messages: numbers in shortest round-trip form.
std::string scalar_text(const nlohmann::json& j);

}  // namespace precsim

// Parsing pieces the subcommands share: comma-separated lists, and a library's
// std::invalid_argument turned into a UsageError (exit 2) that names the option.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_common.h"

namespace precsim::cli {

// "a,b,,c" -> {"a", "b", "c"}: empty items are dropped.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// fn(), with "<what>: " put before the message of any std::invalid_argument it throws.
template <class Fn>
auto or_usage_error(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::invalid_argument& e) {
    throw UsageError(what + ": " + e.what());
  }
}

}  // namespace precsim::cli

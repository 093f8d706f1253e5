// Parsing pieces the subcommands share: comma-separated lists, and a library's
// std::invalid_argument turned into a UsageError (exit 2) that names the option.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_common.h"

namespace precsim::cli {

// The accumulation-model spec grammar (sim/accum/accum_model.h), for --model's help.
inline constexpr const char* kAccumSpecHelp =
    "PRESET, PRESET:key=value[:...] or KIND[:key=value...] with KIND seq|pairwise|kahan|exact|block|unordered; keys: "
    "acc=FORMAT, round=MODE, fma=0|1, n=INT (products per block), F=INT (fraction bits after alignment), final=MODE, "
    "ofb=INT, norm=0|1, floor=INT, insub=0|1, outsub=0|1, cnan=0|1, split=INT, promote=INT (FP32 promotion every N "
    "products), promote_round=MODE, splitk=INT, splitk_scheme=compute|output|inplace|contiguous|serial|pairwise, tf32=MODE (round, final, promote_round: MODE = nearest-even|nearest-away|"
    "toward-zero|up|down|odd; tf32: toward-zero|nearest-even|nearest-away; FORMAT: a format name or eXmY[:options]); or a JSON "
    "object with the same keys and \"kind\"";

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

// Command-line options shared by every command that rounds into a format.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/analysis/tensor_report.h"

namespace precsim::cli {

struct QuantArgs {
  std::string rounding = "nearest-even";
  std::string overflow = "ieee";
  bool flush_subnormals = false;
  uint64_t seed = 0;
  int sr_bits = 32;

  // `seeded`: what --seed seeds besides stochastic rounding (seed_help), or empty.
  void add_to(CLI::App* cmd, const std::string& seeded = "");
  // Validated options; throws UsageError naming the bad value and the allowed ones.
  QuantOptions resolve() const;
};

// Throws UsageError listing the known formats.
Format parse_format_arg(const std::string& option, const std::string& spec);

// The library's (analysis/tensor_report.h): the same objects in every report.
using precsim::format_to_json;
using precsim::quant_options_to_json;
nlohmann::json quant_stats_to_json(const QuantStats& s);

}  // namespace precsim::cli

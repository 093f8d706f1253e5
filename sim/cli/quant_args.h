// Command-line options shared by every command that rounds into a format.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

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

nlohmann::json format_to_json(const Format& f);
nlohmann::json quant_options_to_json(const QuantOptions& o);
nlohmann::json quant_stats_to_json(const QuantStats& s);

}  // namespace precsim::cli

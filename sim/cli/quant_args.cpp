#include <nlohmann/json.hpp>

#include "quant_args.h"

#include "cli_common.h"
#include "precsim/reports/report.h"

namespace precsim::cli {

void QuantArgs::add_to(CLI::App* cmd, const std::string& seeded) {
  cmd->add_option("--rounding", rounding,
                  "nearest-even|nearest-away|toward-zero|up|down|odd|stochastic|stochastic-a|stochastic-b|stochastic-c "
                  "(the last three: IEEE P3109 v4.0 §4.7.4)")
      ->capture_default_str();
  cmd->add_option("--overflow", overflow, "ieee|saturate|SatFinite|SatPropagate|SatNone (the last three: P3109 §4.7.5)")
      ->capture_default_str();
  cmd->add_flag("--flush-subnormals", flush_subnormals, "values below the smallest normal become zero");
  cmd->add_option("--seed", seed, seed_help(seeded.empty() ? "stochastic rounding" : seeded + " and stochastic rounding"))->capture_default_str();
  cmd->add_option("--sr-bits", sr_bits, "random bits per stochastic rounding, 1..32")->capture_default_str();
}

QuantOptions QuantArgs::resolve() const {
  QuantOptions o;
  try {
    o.rounding = parse_rounding(rounding);
    o.overflow = parse_overflow(overflow);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (sr_bits < 1 || sr_bits > 32)
    throw UsageError("--sr-bits " + std::to_string(sr_bits) + " is out of range; allowed: 1..32");
  o.flush_subnormals = flush_subnormals;
  o.sr_bits = sr_bits;
  o.sr_key.seed = seed;
  return o;
}

Format parse_format_arg(const std::string& option, const std::string& spec) {
  std::string err;
  auto f = parse_format(spec, &err);
  if (!f) throw UsageError(option + ": " + err);
  return *f;
}

nlohmann::json quant_stats_to_json(const QuantStats& s) {
  return {{"count", s.count},         {"inexact", s.inexact},     {"underflow_to_zero", s.underflow_to_zero},
          {"subnormal", s.subnormal}, {"overflow", s.overflow},   {"saturated", s.saturated},
          {"nan", s.nan}};
}

}  // namespace precsim::cli

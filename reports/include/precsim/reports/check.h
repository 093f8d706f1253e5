// `precsim report check`: a regression test on numerics. A run is compared with a baseline
// report, metric by metric, under rules; both digests are recomputed from the results rather than
// trusted. With no rule a metric must be identical (numbers bit for bit, -0 differs from +0).
//
// Rules file (JSON; the first rule whose path matches a metric decides it):
//   {"allow_config": ["config.threads", "seeds.*"],
//    "rules": [
//      {"path": "results.**.value_hex", "mode": "bitwise"},
//      {"path": "results.formats.*.epsilon", "mode": "ulps", "format": "bf16", "ulps": 1},
//      {"path": "results.variants.*.series.loss", "mode": "tolerance", "rtol": 1e-3, "atol": 0,
//       "reduce": "final"},
//      {"path": "results.ensemble.final_loss", "mode": "statistical", "sigmas": 3},
//      {"path": "results.timing", "mode": "ignore"}]}
//
// Modes: exact (the default), bitwise (strings and hex-floats character for character, numbers
// bit for bit), ulps (both values rounded to nearest-even in `format`, saturating, at most `ulps`
// codes apart; non-finite values must match), tolerance (|run - base| <= atol + rtol * |base|;
// NaN matches NaN, Inf matches the same Inf), statistical (seed ensembles: an array of per-seed
// values, or of per-seed series reduced first, or an object {"lo", "hi"}; the intervals
// mean +- sigmas * s / sqrt(n) of baseline and run must overlap), ignore.
// A rule applies to a scalar, to a series (an array of numbers, or a SeriesLog object
// {"step", "value"}) element by element, or to a reduction of it: "final", "max", "mean".
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

enum class CheckMode { kExact, kBitwise, kUlps, kTolerance, kStatistical, kIgnore };
enum class Reduction { kNone, kFinal, kMax, kMean };

struct CheckRule {
  std::string path;  // dotted, from the document root ("results..."); globs per json_path.h
  CheckMode mode = CheckMode::kExact;
  Reduction reduce = Reduction::kNone;
  std::string format;  // ulps
  double ulps = 0;
  double rtol = 0, atol = 0;  // tolerance
  double sigmas = 3;          // statistical
};

struct CheckRules {
  std::vector<CheckRule> rules;
  std::vector<std::string> allow_config;  // config.* / seeds.* paths allowed to differ
};

// Throws std::invalid_argument naming the bad entry ("rules[2].mode: 'fuzzy' is not one of ...").
CheckRules parse_check_rules(const nlohmann::json& j);
// A default tolerance rule for every numeric metric no rule names (--rtol / --atol).
CheckRule tolerance_rule(double rtol, double atol);

struct CheckFailure {
  std::string path;
  std::string message;
};

struct CheckOutcome {
  std::vector<CheckFailure> failures;
  size_t compared = 0;  // metrics (scalars, series or reductions) compared
  bool passed() const { return failures.empty(); }
};

// The baseline cannot be compared with this run: another kind, schema or configuration. The
// message lists every differing key.
struct CheckRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Both documents must have passed check_envelope. `default_rule`, when given, applies to numeric
// metrics that no rule matches (strings stay exact).
CheckOutcome check_report(const nlohmann::json& baseline, const nlohmann::json& run, const CheckRules& rules,
                          const std::optional<CheckRule>& default_rule = std::nullopt);

}  // namespace precsim

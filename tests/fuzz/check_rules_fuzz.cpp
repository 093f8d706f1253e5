// libFuzzer target for the rules grammar of `precsim report check --rules FILE`: any JSON must end
// in rules or in std::invalid_argument naming the entry, and rules that parse are applied to two
// small reports that differ (globbed paths, every mode and reduction); a crash, a sanitizer
// report or an exception other than the documented ones is a bug. tests/report_fuzz_test.cpp
// replays the corpus (tests/fuzz/rules_corpus/).
#include <cmath>
#include <stdexcept>

#include "fuzz_json.h"
#include "precsim/reports/check.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"

namespace precsim_fuzz {

// A baseline and a run of one kind and configuration whose results differ in scalars, series,
// ensembles and strings, so that each mode has something to compare.
inline const nlohmann::json& rules_report(bool run) {
  static const auto make = [](bool r) {
    precsim::Report rep("train");
    rep.config() = {{"steps", 2}, {"threads", r ? 2 : 1}};
    rep.seeds() = {{"seed", 1}, {"seeds", {1, 2}}};
    rep.results() = {
        {"loss", r ? 0.5000001 : 0.5},
        {"value_hex", r ? "0x1.0p-1" : "0x1.000002p-1"},
        {"nan", r ? NAN : 1.0},
        {"variants", {{"bf16", {{"series", {{"loss", {1.0, 0.75, r ? 0.51 : 0.5}}}}}}}},
        {"ensemble", {{"final_loss", {0.5, r ? 0.6 : 0.55, 0.52}}, {"band", {{"lo", 0.1}, {"hi", r ? 0.3 : 0.2}}}}},
        {"log", {{"step", {1, 2}}, {"value", {3.0, r ? -0.0 : 0.0}}}},
        {"timing", {{"seconds", r ? 9 : 1}}}};
    return rep.document(/*deterministic=*/true);
  };
  static const nlohmann::json base = make(false), other = make(true);
  return run ? other : base;
}

}  // namespace precsim_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = precsim_fuzz::parse_json_input(data, size);
  if (!j) return 0;
  precsim::CheckRules rules;
  try {
    rules = precsim::parse_check_rules(*j);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const nlohmann::json& base = precsim_fuzz::rules_report(false);
  const nlohmann::json& run = precsim_fuzz::rules_report(true);
  try {
    precsim::check_report(base, run, rules);
    precsim::check_report(base, base, rules, precsim::tolerance_rule(1e-3, 0));
  } catch (const precsim::CheckRefused&) {  // allow_config that does not cover config.threads
  }
  return 0;
}

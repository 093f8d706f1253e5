// Tidy CSV of a train (or demo) report's results, for `report export --csv`:
//   train_steps.csv     one row per seed, variant and logged step: every per-step series, the
//                       shadow-step (`local.*`) and evaluation (`eval.*`) values at their steps
//                       and the reference's series (`reference.*`), empty where not measured
//   train_summary.csv   one row per seed and variant (and the reference): every summary metric,
//                       every role's rounding counts (`roles.<role>.<field>`), FP8 scales
//   train_variants.csv  one row per variant over the seeds: mean, `<metric>_ci95_lo/_hi` with
//                       several seeds, `diverged_seeds`, split and memory estimate
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace precsim {

// True when `results` has the train shape (runs of variants); then calls write(name, text) for
// each file above.
bool export_train_csv(const nlohmann::json& results, const std::function<void(const std::string&, const std::string&)>& write);

}  // namespace precsim

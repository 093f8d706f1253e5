// The merge of a sweep: D/sweep.json's results, read from the unit reports in D/units/ and laid
// out in plan order, so the document is byte-identical whatever the number of workers or ranks and
// whatever order the units finished in (metric definitions: docs/reference/metrics.md, "sweep").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/sim/experiment/sweep_plan.h"

namespace precsim {

// Units of the plan without a finished report in out_dir/units (a rerun runs only these).
std::vector<size_t> unfinished_units(const SweepPlan& plan, const std::filesystem::path& out_dir);

struct SweepMerge {
  nlohmann::json results;            // rows (unit x variant, the FP64 reference included) and points
  std::vector<std::string> missing;  // ids of the units without a finished report
};
SweepMerge merge_sweep(const SweepPlan& plan, const std::filesystem::path& out_dir);

// The configuration block of the sweep report: the sweep file, the resolved base, the axes.
nlohmann::json sweep_report_config(const SweepPlan& plan);

// Per point and variant: mean final and held-out loss with their 95% intervals, as text.
std::string sweep_points_table(const nlohmann::json& results);

}  // namespace precsim

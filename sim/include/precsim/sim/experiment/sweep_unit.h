// One unit of a sweep: its training run, and its report file D/units/ID.json (a train report
// without the environment block, so the same unit gives the same bytes on any rank or machine).
#pragma once

#include <filesystem>
#include <string>

#include "precsim/sim/experiment/sweep_plan.h"

namespace precsim {

// The unit's report file in the sweep's output folder.
std::filesystem::path unit_report_path(const std::filesystem::path& out_dir, const SweepUnit& u);

// Runs the unit (run_training on its configuration) and returns the text of its report. Throws
// std::invalid_argument for a configuration that fails before its first step.
std::string run_sweep_unit(const SweepUnit& u);

// The finished report of this unit, read from `file`: a valid report whose digest matches its
// results and whose configuration is the unit's. Null when the file is missing or is not that
// (then the unit runs again; a report is only ever written whole, by rename).
nlohmann::json read_finished_unit(const std::filesystem::path& file, const SweepUnit& u);

}  // namespace precsim

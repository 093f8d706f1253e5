// Shared by `precsim train` and `precsim demo`: validates everything, runs the experiment with a
// progress bar on stderr, prints the summary table and writes the train report.
#pragma once

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "precsim/sim/runner.h"

namespace precsim::cli {

// Parses a config (throwing UsageError naming the bad key), before any long work.
TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source);
void run_train_report(const TrainConfig& c, const OutputOptions& out);

}  // namespace precsim::cli

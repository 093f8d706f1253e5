// Shared by `precsim train` and `precsim demo`: validates everything, runs the experiment with a
// progress bar on stderr, optionally streams logged steps as JSON Lines, prints the summary table
// and writes the train report. SIGINT/SIGTERM end the run after the current step with a report of
// what finished ("status": "interrupted") and exit code 128 + signal.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim::cli {

// Where the variants' matrix products also run (`--backend`): empty `make` is the emulation alone.
struct TrainTwin {
  std::function<std::shared_ptr<GemmExecutor>(const Recipe&)> make;
  nlohmann::json info;  // results.backend of the report: {"name", ...}
};

// Parses a config (throwing UsageError naming the bad key), before any long work.
TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source);
// `jsonl`: "" for no stream, "-" for standard output (then no summary table), or a file.
void run_train_report(const TrainConfig& c, const OutputOptions& out, const std::string& jsonl = "",
                      const TrainTwin& twin = {});
// Adds --jsonl to a training command.
void add_jsonl_option(CLI::App* cmd, std::string& jsonl);

}  // namespace precsim::cli

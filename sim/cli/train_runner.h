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
// A config file (UsageError if unreadable or not JSON), or a named experiment (--experiment; tiny-gpt),
// or an empty object when neither is given; both: UsageError.
nlohmann::json config_or_experiment(const std::string& config, const std::string& experiment);
// Options of a command that trains counterfactual recipes of one experiment (attribute, search).
struct ExperimentArgs {
  std::string config, experiment;
  int64_t steps = 0;
  int64_t seed = -1;  // -1: the config's
  int seeds = 0;
  int threads = 0;
  OutputOptions out;
};
// --steps's help, which demo's --steps shares.
inline constexpr const char* kStepsHelp = "optimizer steps (overrides the config's)";
// Adds --config, --experiment, --steps, --seed, --seeds, --threads, --out, --json, --deterministic.
void add_experiment_options(CLI::App* cmd, ExperimentArgs& a);
// The experiment's configuration with --steps, --seed and --seeds applied and `recipes` (when the config
// has none, or when `replace`) set to `recipes`; `what` names the command in messages.
TrainConfig experiment_config(const ExperimentArgs& a, const nlohmann::json& recipes, bool replace, const std::string& what);
// One experiment of attribute or search: `kind`'s report with the configuration `c` whose only
// variant is the recipe `recipe()` gives, config[kind] = `settings`, the seeds, and results of
// `run` (with progress on stderr); prints the kind's table (command_tables.h) and writes the
// report. The library's std::invalid_argument, from `recipe` or `run`, becomes a UsageError.
void run_experiment_report(const std::string& kind, TrainConfig c, const std::function<Recipe()>& recipe,
                           const nlohmann::json& settings, const OutputOptions& out,
                           const std::function<nlohmann::json(const TrainConfig&, const RunHooks&)>& run);
// A train-like report's seeds block: {"seed", "seeds": [seed, seed + 1, ...]}.
nlohmann::json seeds_json(const TrainConfig& c);
// A progress bar on stderr (one line per percent when stderr is not a terminal).
Progress progress_bar(int seeds);
// Adds --jsonl to a training command.
void add_jsonl_option(CLI::App* cmd, std::string& jsonl);

}  // namespace precsim::cli

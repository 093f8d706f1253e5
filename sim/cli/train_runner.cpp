#include "train_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command_tables.h"
#include "gpu_cli.h"
#include "precsim/reports/interrupt.h"
#include "precsim/reports/jsonl.h"

namespace precsim::cli {

TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source) {
  try {
    return train_config_from_json(j);
  } catch (const std::invalid_argument& e) {
    throw UsageError(source + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(source + ": " + e.what());
  }
}

namespace {

// Experiments by name (--experiment); each is a full configuration.
const std::map<std::string, const char*>& experiments() {
  // tiny-gpt: a 2-block transformer learning to copy variable-length sequences, the reference and
  // four recipes side by side in under two minutes on two cores.
  static const std::map<std::string, const char*> kExperiments = {{"tiny-gpt", R"({
    "steps": 200, "batch": 16, "seed": 1, "shadow_every": 20,
    "model": {"type": "transformer", "layers": 2, "heads": 2, "width": 32, "context": 12},
    "data": {"kind": "copy", "symbols": 6, "min_length": 2, "max_length": 6, "train_size": 1024, "heldout_size": 128},
    "optimizer": {"kind": "adamw", "lr": 0.003},
    "recipes": ["fp32", "bf16-amp", "fp16-amp", "fp8-delayed"]})"}};
  return kExperiments;
}

}  // namespace

nlohmann::json read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--config '" + path + "': cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError("--config '" + path + "': not valid JSON: " + e.what());
  }
}

// Data files named in a config are found beside the config, wherever precsim runs from.
void resolve_data_paths(nlohmann::json& j, const std::string& config_path) {
  if (!j.is_object() || !j.contains("data") || !j["data"].is_object()) return;
  const std::filesystem::path dir = std::filesystem::path(config_path).parent_path();
  for (const char* key : {"features_path", "labels_path", "text_path"}) {
    const auto it = j["data"].find(key);
    if (it == j["data"].end() || !it->is_string()) continue;
    const std::filesystem::path p = it->get<std::string>();
    if (p.is_relative()) *it = (dir / p).lexically_normal().string();
  }
}

nlohmann::json config_or_experiment(const std::string& config, const std::string& experiment) {
  if (experiment.empty()) {
    if (config.empty()) return nlohmann::json::object();
    nlohmann::json j = read_config(config);
    resolve_data_paths(j, config);
    return j;
  }
  const auto it = experiments().find(experiment);
  if (it == experiments().end()) {
    std::string known;
    for (const auto& [name, cfg] : experiments()) known += (known.empty() ? "" : ", ") + name;
    throw UsageError("--experiment '" + experiment + "' is unknown; known experiments: " + known);
  }
  if (!config.empty()) throw UsageError("--experiment and --config exclude each other");
  return nlohmann::json::parse(it->second);
}

void add_experiment_options(CLI::App* cmd, ExperimentArgs& a) {
  cmd->add_option("--config", a.config, "JSON experiment configuration (its keys: precsim train --config-help)");
  cmd->add_option("--experiment", a.experiment, "a named experiment: tiny-gpt");
  cmd->add_option("--steps", a.steps, kStepsHelp)->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seed", a.seed,
                  seed_help("the first of --seeds: data, initial weights, batches and stochastic rounding (default: the "
                            "config's)"))
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  cmd->add_option("--seeds", a.seeds, "run every variant over N seeds (seed, seed + 1, ...): means and 95% intervals "
                                      "need at least 2")
      ->check(CLI::Range(1, 1000));
  add_threads_option(cmd, a.threads);
  add_output_options(cmd, a.out);
}

TrainConfig experiment_config(const ExperimentArgs& a, const nlohmann::json& recipes, bool replace, const std::string& what) {
  nlohmann::json j = config_or_experiment(a.config, a.experiment);
  if (!j.is_object()) throw UsageError("--config '" + a.config + "': expected a JSON object");
  if (replace || !j.contains("recipes")) j["recipes"] = recipes;
  if (a.steps > 0) j["steps"] = a.steps;
  if (a.seed >= 0) j["seed"] = a.seed;
  if (a.seeds > 0) j["seeds"] = a.seeds;
  return parse_train_config(j, a.config.empty() ? what : "--config '" + a.config + "'");
}

nlohmann::json seeds_json(const TrainConfig& c) {
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  return {{"seed", c.seed}, {"seeds", seeds}};
}

void run_experiment_report(const std::string& kind, TrainConfig c, const std::function<Recipe()>& recipe,
                           const nlohmann::json& settings, const OutputOptions& out,
                           const std::function<nlohmann::json(const TrainConfig&, const RunHooks&)>& run) {
  check_output(out);
  Report r(kind);
  RunHooks hooks;
  hooks.progress = progress_bar(c.seeds);
  try {
    c.variants = {recipe()};
    r.config() = train_config_to_json(c);
    r.config()[kind] = settings;
    r.seeds() = seeds_json(c);
    r.results() = run(c, hooks);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!out.json) std::cout << *command_table(r.document(true));
  finish_report(r, out);
}

void add_jsonl_option(CLI::App* cmd, std::string& jsonl) {
  cmd->add_option("--jsonl", jsonl,
                  "stream one JSON line per logged step per variant to FILE while the run goes ('-': stdout, "
                  "which then carries nothing else)");
}

namespace {

// Progress on stderr: a bar redrawn in place on a terminal, or else a line every few seconds with
// the time elapsed and an estimate of the time left, and one when a seed ends.
class TrainProgress {
 public:
  TrainProgress(ProgressMode mode, int seeds) : mode_(mode), seeds_(seeds), start_(Clock::now()), last_(start_) {}
  void step(int si, int64_t step, int64_t total) {
    if (mode_ == ProgressMode::kBar) bar(si, step, total);
    else if (mode_ == ProgressMode::kLines) line(si, step, total);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void bar(int si, int64_t step, int64_t total) {
    const int pct = int((100 * (step + 1)) / total);
    if (pct == last_pct_ && step + 1 != total) return;
    last_pct_ = pct;
    std::cerr << fmt::format("\rseed {}/{} [{:<25}] {:3d}% step {}/{}", si + 1, seeds_, std::string(pct / 4, '#'), pct,
                             step + 1, total);
    if (step + 1 == total) std::cerr << "\n", last_pct_ = -1;
  }
  void line(int si, int64_t step, int64_t total) {
    const auto now = Clock::now();
    if (step + 1 != total && now - last_ < std::chrono::seconds(5)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double done = static_cast<double>(si) * total + static_cast<double>(step + 1);
    const double left = elapsed / done * (static_cast<double>(seeds_) * total - done);
    std::cerr << fmt::format("seed {}/{} step {}/{} ({:.0f}%), {:.1f} s elapsed, about {:.0f} s left\n", si + 1, seeds_,
                             step + 1, total, 100.0 * done / (static_cast<double>(seeds_) * total), elapsed, left);
  }
  ProgressMode mode_;
  int seeds_;
  Clock::time_point start_, last_;
  int last_pct_ = -1;
};

}  // namespace

// attribute and search show the same progress as train (--progress, --quiet).
Progress progress_bar(int seeds) {
  auto p = std::make_shared<TrainProgress>(progress_mode(), seeds);
  return [p](int si, int64_t step, int64_t total) { p->step(si, step, total); };
}

void run_train_report(const TrainConfig& c, const OutputOptions& out, const std::string& jsonl,
                      const TrainTwin& twin) {
  if (jsonl == "-" && out.json) throw UsageError("--jsonl - and --json both want stdout: give --jsonl a file name");
  check_output(out);
  Report r("train");
  r.config() = train_config_to_json(c);
  r.seeds() = seeds_json(c);
  std::unique_ptr<JsonlWriter> stream;
  if (!jsonl.empty()) {
    try {
      stream = std::make_unique<JsonlWriter>(jsonl, nlohmann::json{{"kind", "train"}, {"config", r.config()}, {"seeds", r.seeds()}});
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--jsonl: ") + e.what());
    }
  }
  const InterruptGuard guard;
  RunHooks hooks;
  hooks.stop = [&guard] { return guard.requested(); };
  hooks.gemm_executor = twin.make;
  if (twin.make) hooks.executor_name = twin.info.at("name").get<std::string>();
  if (stream) hooks.on_logged_step = [&stream](const nlohmann::json& rec) { stream->write(rec); };
  const ProgressMode mode = progress_mode();
  const bool tty = mode == ProgressMode::kBar;
  TrainProgress progress(mode, c.seeds);
  hooks.progress = [&](int si, int64_t step, int64_t total) { progress.step(si, step, total); };
  TrainResults results;
  try {
    results = run_training(c, hooks);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  } catch (const GpuError& e) {
    rethrow(e);
  }
  r.results() = train_results_json(results);
  if (twin.make) r.results()["backend"] = twin.info;
  if (guard.requested()) {
    r.set_status("interrupted");
    if (tty) std::cerr << "\n";
  }
  if (!out.json && jsonl != "-") std::cout << train_table(r.results());
  finish_report(r, out);
  // A run without --out leaves nothing behind: said, so that the next long run keeps its report.
  if (out.out.empty() && !out.json)
    note() << "nothing was saved: the report was not written; give --out FILE to keep it"
              << (jsonl.empty() || jsonl == "-" ? "" : " (the logged steps are in " + jsonl + ")") << "\n";
  if (guard.requested()) {
    throw Interrupted(fmt::format("interrupted by signal {} after {} of {} steps of seed {}/{}; the report holds what finished",
                                  guard.signal(), results.runs.back().steps_completed, c.steps, results.runs.size(), c.seeds),
                      guard.exit_code());
  }
}

}  // namespace precsim::cli

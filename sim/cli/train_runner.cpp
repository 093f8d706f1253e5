#include "train_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

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

void add_jsonl_option(CLI::App* cmd, std::string& jsonl) {
  cmd->add_option("--jsonl", jsonl,
                  "stream one JSON line per logged step per variant to FILE while the run goes ('-': stdout, "
                  "which then carries nothing else)");
}

namespace {

// Per variant and seed, the twin on its GEMM executor against the emulated variant.
std::string twin_table(const nlohmann::json& results) {
  std::string t = fmt::format("\n{:<20} {:>5} {:>16} {:>16} {:>9}\n", results["backend"]["name"].get<std::string>() + " twin",
                              "seed", "max|loss diff|", "max weight err", "diverged");
  for (const auto& run : results["runs"])
    for (const auto& v : run["variants"]) {
      const auto& s = v["backend"]["summary"];
      t += fmt::format("{:<20} {:>5} {:>16.3g} {:>16.3g} {:>9}\n", v["name"].get<std::string>(), run["seed"].get<uint64_t>(),
                       read_number(s["max_abs_loss_diff"]), read_number(s["max_weight_rel_err"]),
                       s["diverged_at"].is_null() ? "-" : std::to_string(s["diverged_at"].get<int64_t>()));
    }
  return t;
}

}  // namespace

void run_train_report(const TrainConfig& c, const OutputOptions& out, const std::string& jsonl,
                      const TrainTwin& twin) {
  if (jsonl == "-" && out.json) throw UsageError("--jsonl - and --json both want stdout: give --jsonl a file name");
  check_output(out);
  Report r("train");
  r.config() = train_config_to_json(c);
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  r.seeds() = {{"seed", c.seed}, {"seeds", seeds}};
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
  const bool tty = isatty(STDERR_FILENO);
  int last_pct = -1;
  hooks.progress = [&](int si, int64_t step, int64_t total) {
    const int pct = int((100 * (step + 1)) / total);
    if (pct == last_pct && step + 1 != total) return;
    last_pct = pct;
    const int filled = pct / 4;
    std::cerr << fmt::format("{}seed {}/{} [{:<25}] {:3d}% step {}/{}{}", tty ? "\r" : "", si + 1, c.seeds,
                             std::string(filled, '#'), pct, step + 1, total, tty ? "" : "\n");
    if (step + 1 == total) std::cerr << (tty ? "\n" : ""), last_pct = -1;
  };
  try {
    r.results() = run_training(c, hooks);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  } catch (const GpuError& e) {
    rethrow(e);
  }
  if (twin.make) r.results()["backend"] = twin.info;
  if (guard.requested()) {
    r.set_status("interrupted");
    if (tty) std::cerr << "\n";
  }
  if (!out.json && jsonl != "-") {
    std::cout << summary_table(r.results());
    if (twin.make) std::cout << twin_table(r.results());
  }
  finish_report(r, out);
  if (guard.requested()) {
    const auto& runs = r.results()["runs"];
    throw Interrupted(fmt::format("interrupted by signal {} after {} of {} steps of seed {}/{}; the report holds what finished",
                                  guard.signal(), runs.back()["steps_completed"].get<int64_t>(), c.steps, runs.size(), c.seeds),
                      guard.exit_code());
  }
}

}  // namespace precsim::cli

#include "train_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
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
  const ProgressMode mode = progress_mode();
  const bool tty = mode == ProgressMode::kBar;
  TrainProgress progress(mode, c.seeds);
  hooks.progress = [&](int si, int64_t step, int64_t total) { progress.step(si, step, total); };
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
  // A run without --out leaves nothing behind: said, so that the next long run keeps its report.
  if (out.out.empty() && !out.json)
    note() << "nothing was saved: the report was not written; give --out FILE to keep it"
              << (jsonl.empty() || jsonl == "-" ? "" : " (the logged steps are in " + jsonl + ")") << "\n";
  if (guard.requested()) {
    const auto& runs = r.results()["runs"];
    throw Interrupted(fmt::format("interrupted by signal {} after {} of {} steps of seed {}/{}; the report holds what finished",
                                  guard.signal(), runs.back()["steps_completed"].get<int64_t>(), c.steps, runs.size(), c.seeds),
                      guard.exit_code());
  }
}

}  // namespace precsim::cli

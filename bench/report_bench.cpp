// `precsim report summary` and `report check` on a ~100 MB train report in the current layout: a
// real run of `precsim train` (8 recipes, shadow steps and series logged at every step), whose
// per-step series are then tiled to kSteps points as if the run had lasted that long, written with
// dump(2) as emit_report does. The file is left at $TMPDIR/precsim_report_bench.json so the CLI
// can be measured on it too (/usr/bin/time -v precsim report check --baseline F F).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "precsim/reports/check.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"
#include "precsim/reports/summary.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

constexpr int64_t kRealSteps = 100;   // steps actually trained
constexpr int64_t kSteps = 25000;     // points per series after tiling: about 99 MB in all

// Every array of a per-step series object ("series", "local") repeated to kSteps points; "step"
// counts on, so the series reads as one long run logged at every step.
void tile_series(nlohmann::json& series) {
  for (auto& [key, values] : series.items()) {
    const nlohmann::json one = values;
    values = nlohmann::json::array();
    for (int64_t i = 0; i < kSteps; ++i) values.push_back(key == "step" ? nlohmann::json(i) : one[i % one.size()]);
  }
}

const std::filesystem::path& big_report() {
  static const std::filesystem::path path = [] {
    const auto p = std::filesystem::temp_directory_path() / "precsim_report_bench.json";
    std::cerr << "report_bench: training " << kRealSteps << " steps, then writing " << p << "\n";
    TrainConfig c = train_config_from_json(nlohmann::json::parse(R"({
      "batch": 16, "seed": 3, "log_every": 1, "shadow_every": 1,
      "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
      "model": {"hidden": [16]}, "optimizer": {"kind": "adamw", "lr": 0.01},
      "recipes": ["fp32", "bf16-amp", "fp16-amp", "fp16-noscale", "bf16-pure", "bf16-pure-sr", "fp8-current", "mxfp8"]})"));
    c.steps = kRealSteps;
    Report r("train");
    r.results() = run_training(c);
    c.steps = kSteps;
    r.config() = train_config_to_json(c);
    r.seeds() = {{"seed", c.seed}, {"seeds", {c.seed}}};
    for (auto& run : r.results()["runs"]) {
      tile_series(run["reference"]["series"]);
      for (auto& v : run["variants"]) {
        tile_series(v["series"]);
        tile_series(v["local"]);
      }
      if (run.contains("steps_completed")) run["steps_completed"] = kSteps;
    }
    write_file_atomic(p, r.document(true).dump(2) + "\n");
    return p;
  }();
  return path;
}

void counters(benchmark::State& state) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(big_report())) / 1e6;
  state.counters["max_rss_MB"] = static_cast<double>(ru.ru_maxrss) / 1e3;
}

void BM_ReportSummary(benchmark::State& state) {
  big_report();
  for (auto _ : state) {
    const auto doc = load_report(big_report());
    benchmark::DoNotOptimize(summarize_report(doc));
  }
  counters(state);
}
BENCHMARK(BM_ReportSummary)->Unit(benchmark::kSecond)->Iterations(2);

void BM_ReportCheck(benchmark::State& state) {
  big_report();
  for (auto _ : state) {
    const auto base = load_report(big_report());
    const auto run = load_report(big_report());
    const auto o = check_report(base, run, {});
    if (!o.passed()) state.SkipWithError("a report does not pass against itself");
  }
  counters(state);
}
BENCHMARK(BM_ReportCheck)->Unit(benchmark::kSecond)->Iterations(2);

}  // namespace
}  // namespace precsim

BENCHMARK_MAIN();

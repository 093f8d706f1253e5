// `precsim report summary` and `report check` on a ~100 MB train-like report (8 variants x 8
// series x 64k points, written with dump(2) as emit_report does). The file is left at
// $TMPDIR/precsim_report_bench.json so the CLI can be measured on it too (/usr/bin/time -v).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <random>

#include "precsim/reports/check.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"
#include "precsim/reports/series.h"
#include "precsim/reports/summary.h"

namespace precsim {
namespace {

const std::filesystem::path& big_report() {
  static const std::filesystem::path path = [] {
    const auto p = std::filesystem::temp_directory_path() / "precsim_report_bench.json";
    constexpr int64_t kSteps = 26000;
    Report r("train");
    r.config() = {{"steps", kSteps}, {"recipes", 8}};
    r.seeds() = {{"data", 1}};
    std::mt19937_64 gen(1);
    std::normal_distribution<double> nd;
    nlohmann::json variants = nlohmann::json::array();
    for (int v = 0; v < 8; ++v) {
      SeriesLog log({.log_every = 1}, kSteps);
      for (int64_t s = 0; s < kSteps; ++s)
        for (const char* name : {"loss", "loss_gap", "local_error", "drift", "grad_norm", "underflow", "loss_scale", "lr"})
          log.record(name, s, nd(gen));
      variants.push_back({{"recipe", std::string("r").append(std::to_string(v))}, {"series", log.to_json()}});
    }
    r.results()["variants"] = std::move(variants);
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

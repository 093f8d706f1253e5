// Float32 quantize throughput (ns per element) on 2^24 pre-faulted elements, statistics on, beside
// a memcpy of the same array in the same run: the kernel should cost at most 1.5x memcpy with
// nearest-even and 2x with stochastic rounding. scripts/bench.sh prints the ratios.
//   quantize_bench [--benchmark_filter=e4m3] [benchmark flags]
// Names: quantize/<format>/<rounding>/<data>/threads:<n>, memcpy/threads:<n>, and
// quantize_target/<target>/... for each compiled Highway target (one thread, e4m3 nearest-even).
// Figures assume the default floating-point environment (no FTZ/DAZ), as the kernel does.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"

namespace precsim {
namespace {

constexpr size_t kN = size_t{1} << 24;

struct Data {
  std::vector<float> normal, log_uniform, out;
};

// Filled once; writing every element pre-faults the pages before any timing.
const Data& data() {
  static const Data d = [] {
    Data x;
    x.normal.resize(kN);
    x.log_uniform.resize(kN);
    x.out.assign(kN, 0.0f);
    std::mt19937_64 gen(1);
    std::normal_distribution<float> normal;
    for (float& v : x.normal) v = normal(gen);
    // |x| = 2^u, u uniform on [-20, 20), random sign: 40 binades of magnitudes.
    std::uniform_real_distribution<double> u(-20.0, 20.0);
    for (size_t i = 0; i < kN; ++i) x.log_uniform[i] = static_cast<float>((gen() & 1 ? -1.0 : 1.0) * std::exp2(u(gen)));
    return x;
  }();
  return d;
}

void set_threads(int threads) { omp_set_num_threads(threads); }

// memcpy split into the same fixed chunks the quantize path uses across threads.
void parallel_copy(float* dst, const float* src, size_t n) {
  constexpr size_t kChunk = size_t{1} << 16;
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t b = static_cast<size_t>(c) * kChunk;
    std::memcpy(dst + b, src + b, std::min(kChunk, n - b) * sizeof(float));
  }
}

void per_element(benchmark::State& state) {
  state.counters["ns_per_elem"] = benchmark::Counter(
      static_cast<double>(kN), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kN * 2 * sizeof(float)));
}

void bm_memcpy(benchmark::State& state, int threads) {
  const Data& d = data();
  auto* out = const_cast<float*>(d.out.data());
  set_threads(threads);
  for (auto _ : state) {
    if (threads == 1) std::memcpy(out, d.normal.data(), kN * sizeof(float));
    else parallel_copy(out, d.normal.data(), kN);
    benchmark::ClobberMemory();
  }
  per_element(state);
}

void bm_quantize(benchmark::State& state, const Format& f, Rounding r, bool log_uniform, int threads) {
  const Data& d = data();
  const std::vector<float>& in = log_uniform ? d.log_uniform : d.normal;
  auto* out = const_cast<float*>(d.out.data());
  QuantOptions o;
  o.rounding = r;
  o.sr_key = SrKey{7, 0, 0, 0};
  set_threads(threads);
  QuantStats stats;
  for (auto _ : state) {
    quantize(f, std::span<const float>(in), std::span<float>(out, kN), o, &stats);
    benchmark::ClobberMemory();
  }
  per_element(state);
  state.counters["inexact_frac"] = static_cast<double>(stats.inexact) / static_cast<double>(stats.count);
}

// Under a busy machine the fastest repetition is the best estimate of the cost itself.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void register_all() {
  const int all = omp_get_num_procs();
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  for (const int t : thread_counts) {
    const std::string ts = "/threads:" + std::to_string(t);
    benchmark::RegisterBenchmark(("memcpy" + ts).c_str(), bm_memcpy, t)->UseRealTime()->ComputeStatistics("min", min_of);
    for (const char* name : {"bf16", "fp16", "e5m2", "e4m3", "e2m1"}) {
      const Format f = format_by_name(name);
      for (const Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
        for (const bool lu : {false, true}) {
          const std::string n = "quantize/" + std::string(name) + "/" + std::string(to_string(r)) +
                                (lu ? "/log-uniform" : "/normal") + ts;
          benchmark::RegisterBenchmark(n.c_str(), bm_quantize, f, r, lu, t)->UseRealTime()->ComputeStatistics("min", min_of);
        }
      }
    }
  }
  // Every compiled target, forced in turn: what run-time dispatch buys.
  for (const auto& target : quantize_simd_targets()) {
    const std::string n = "quantize_target/" + target + "/e4m3/nearest-even/normal/threads:1";
    benchmark::RegisterBenchmark(n.c_str(), [target](benchmark::State& st) {
      force_quantize_simd_target(target);
      bm_quantize(st, format_by_name("e4m3"), Rounding::kNearestEven, false, 1);
      force_quantize_simd_target("");
    })->UseRealTime()->ComputeStatistics("min", min_of);
  }
}

}  // namespace
}  // namespace precsim

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  precsim::register_all();
  benchmark::AddCustomContext("quantize_simd_target", precsim::quantize_simd_target());
  benchmark::AddCustomContext("elements", std::to_string(precsim::kN));
  benchmark::AddCustomContext("stats", "on");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

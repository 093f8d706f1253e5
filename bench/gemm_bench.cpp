// Emulated GEMM throughput in GMAC/s against Eigen's float GEMM in the same run, on square shapes
// 512, 1024, 2048. Single thread for every case (set PRECSIM_BENCH_THREADS to change it), so the
// ratios compare kernels, not thread scaling. Output statistics are on (gemm always counts them).
// Eigen is built without -march=native like the rest (SSE2 kernels); the emulated kernels pick
// their Highway target at run time. Run with OMP_WAIT_POLICY=passive on a shared machine.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdlib>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"

namespace {

int bench_threads() {
  const char* t = std::getenv("PRECSIM_BENCH_THREADS");
  return t ? std::atoi(t) : 1;
}

struct Operands {
  std::vector<float> a, b;
  std::vector<float> c;
};

// BF16 (or the given format) operands, pre-faulted.
Operands make_operands(int64_t s, const char* format) {
  Operands o;
  o.a.resize(s * s);
  o.b.resize(s * s);
  o.c.assign(s * s, 0.0f);
  precsim::fill_normal(o.a, 1, 1);
  precsim::fill_normal(o.b, 1, 2);
  const precsim::Format f = precsim::format_by_name(format);
  precsim::quantize(f, o.a, o.a);
  precsim::quantize(f, o.b, o.b);
  return o;
}

void report(benchmark::State& state, int64_t s) {
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(s) * s * s * state.iterations() * 1e-9,
                                                benchmark::Counter::kIsRate);
}

void BM_EigenFloat(benchmark::State& state) {
  const int64_t s = state.range(0);
  Operands o = make_operands(s, "bf16");
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> a(o.a.data(), s, s), b(o.b.data(), s, s);
  Eigen::Map<Mat> c(o.c.data(), s, s);
  Eigen::setNbThreads(bench_threads());
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(o.c.data());
  }
  report(state, s);
}

void run_model(benchmark::State& state, const char* model, const char* format) {
  const int64_t s = state.range(0);
  Operands o = make_operands(s, format);
  precsim::GemmArgs g;
  g.m = g.n = g.k = s;
  g.a_format = g.b_format = precsim::format_by_name(format);
  g.input_policy = precsim::InputPolicy::kTrust;
  g.threads = bench_threads();
  const precsim::AccumModel m = precsim::parse_accum_model(model);
  for (auto _ : state) {
    precsim::gemm(m, g, o.a.data(), o.b.data(), o.c.data());
    benchmark::DoNotOptimize(o.c.data());
  }
  report(state, s);
}

void BM_Fp32SeqBf16(benchmark::State& state) { run_model(state, "fp32-seq", "bf16"); }
void BM_Fp32FmaBf16(benchmark::State& state) { run_model(state, "fp32-fma", "bf16"); }
void BM_BlockFmaA100Bf16(benchmark::State& state) { run_model(state, "a100", "bf16"); }
void BM_BlockFmaH100Bf16(benchmark::State& state) { run_model(state, "h100", "bf16"); }
void BM_BlockFmaH100Fp8Promote(benchmark::State& state) { run_model(state, "h100-fp8-promote", "e4m3"); }

#define SIZES ->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_EigenFloat) SIZES;
BENCHMARK(BM_Fp32SeqBf16) SIZES;
BENCHMARK(BM_Fp32FmaBf16) SIZES;
BENCHMARK(BM_BlockFmaA100Bf16) SIZES;
BENCHMARK(BM_BlockFmaH100Bf16) SIZES;
BENCHMARK(BM_BlockFmaH100Fp8Promote) SIZES;

}  // namespace

BENCHMARK_MAIN();

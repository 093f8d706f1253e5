// Emulated GEMM throughput in GMAC/s against OpenBLAS's cblas_sgemm (what NumPy runs) in the same
// run, square shapes 512, 1024, 2048 on one thread, and 2048 on two threads (the scaling target);
// instruction models (ARCH/INSTRUCTION) at 2048 only.
// Built with OpenBLAS when CMake finds it (bench/CMakeLists.txt); without it only the emulated
// kernels run. OpenBLAS picks its kernel for the CPU at run time; the emulated kernels pick their
// Highway target at run time (bit-identical on every target). Run with
// --benchmark_enable_random_interleaving=true and repetitions so that the peer and precsim share
// the machine's load; OMP_WAIT_POLICY=passive on a shared machine. Output statistics are on
// (gemm always counts them).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/core/random.h"

#ifdef PRECSIM_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

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

#ifdef PRECSIM_BENCH_OPENBLAS
void BM_OpenBlasSgemm(benchmark::State& state) {
  const int64_t s = state.range(0);
  Operands o = make_operands(s, "bf16");
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, o.a.data(), s, o.b.data(), s, 0.0f,
                o.c.data(), s);
    benchmark::DoNotOptimize(o.c.data());
  }
  report(state, s);
}
#endif

void run_model(benchmark::State& state, const char* model, const char* format) {
  const int64_t s = state.range(0);
  Operands o = make_operands(s, format);
  precsim::GemmArgs g;
  g.m = g.n = g.k = s;
  g.a_format = g.b_format = precsim::format_by_name(format);
  g.input_policy = precsim::InputPolicy::kTrust;
  g.threads = static_cast<int>(state.range(1));
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
// Instruction models by name (ARCH/INSTRUCTION): the block-FMA kernel with the instruction's parameters.
void BM_InstrAmpereBf16(benchmark::State& state) { run_model(state, "ampere/mma.m16n8k16.f32.bf16.bf16.f32", "bf16"); }
void BM_InstrHopperBf16(benchmark::State& state) { run_model(state, "hopper/wgmma.m64n8k16.f32.bf16.bf16", "bf16"); }
void BM_InstrHopperE4m3(benchmark::State& state) { run_model(state, "hopper/wgmma.m64n8k32.f32.e4m3.e4m3", "e4m3"); }
void BM_InstrBlackwellE4m3(benchmark::State& state) {
  run_model(state, "blackwell/tcgen05.mma.m128n8k32.kind::f8f6f4.f32.e4m3.e4m3", "e4m3");
}

// {size, threads}; the benchmark's name ends in /size/threads.
#define SIZES                                                                                            \
  ->Args({512, 1})->Args({1024, 1})->Args({2048, 1})->Args({2048, 2})->ArgNames({"size", "threads"})     \
      ->Unit(benchmark::kMillisecond)->UseRealTime()
#ifdef PRECSIM_BENCH_OPENBLAS
BENCHMARK(BM_OpenBlasSgemm) SIZES;
#endif
BENCHMARK(BM_Fp32SeqBf16) SIZES;
BENCHMARK(BM_Fp32FmaBf16) SIZES;
BENCHMARK(BM_BlockFmaA100Bf16) SIZES;
BENCHMARK(BM_BlockFmaH100Bf16) SIZES;
BENCHMARK(BM_BlockFmaH100Fp8Promote) SIZES;
// The instruction models at the target's size only.
#define TARGET_SIZE                                                                                  \
  ->Args({2048, 1})->Args({2048, 2})->ArgNames({"size", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_InstrAmpereBf16) TARGET_SIZE;
BENCHMARK(BM_InstrHopperBf16) TARGET_SIZE;
BENCHMARK(BM_InstrHopperE4m3) TARGET_SIZE;
BENCHMARK(BM_InstrBlackwellE4m3) TARGET_SIZE;

}  // namespace

BENCHMARK_MAIN();

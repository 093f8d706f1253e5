// In-format arithmetic throughput: one scalar operation per item on pre-generated operands
// (4096 of them, cycled), and sequential accumulation through the value API. Single thread.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "precsim/formats/arith.h"

namespace precsim {
namespace {

constexpr size_t kN = 4096;

const char* const kFormats[] = {"fp64", "fp32", "bf16", "fp16", "float8_e4m3fn", "float4_e2m1fn"};

// Finite, non-NaN codes: random values of moderate range rounded into the format.
std::vector<uint64_t> operands(const Format& f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(-4.0, 4.0);
  std::vector<uint64_t> out(kN);
  for (auto& c : out) {
    const double v = std::ldexp(1.0 + mag(rng) / 8, int(mag(rng)));
    c = encode(f, (rng() & 1) ? v : -v).code;
  }
  return out;
}

template <typename Op>
void binary(benchmark::State& state, Op op) {
  const Format f = format_by_name(kFormats[state.range(0)]);
  QuantOptions o;
  o.rounding = state.range(1) ? Rounding::kStochastic : Rounding::kNearestEven;
  const auto a = operands(f, 1), b = operands(f, 2);
  uint64_t sink = 0, i = 0;
  for (auto _ : state) {
    const size_t k = i % kN;
    sink += op(f, a[k], b[k], o, i).code;
    ++i;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.SetLabel(f.name + (state.range(1) ? " stochastic" : " nearest-even"));
}

void BM_Add(benchmark::State& s) { binary(s, add_codes); }
void BM_Mul(benchmark::State& s) { binary(s, mul_codes); }
void BM_Div(benchmark::State& s) { binary(s, div_codes); }
void BM_Fma(benchmark::State& s) {
  binary(s, [](const Format& f, uint64_t a, uint64_t b, const QuantOptions& o, uint64_t i) {
    return fma_codes(f, a, b, a ^ (b & 0xff), o, i);
  });
}
void BM_Sqrt(benchmark::State& s) {
  binary(s, [](const Format& f, uint64_t a, uint64_t, const QuantOptions& o, uint64_t i) {
    return sqrt_code(f, a & ~f.sign_mask(), o, i);
  });
}

void formats_and_modes(benchmark::internal::Benchmark* b) {
  for (int f = 0; f < 6; ++f) b->Args({f, 0});
  b->Args({2, 1});  // bf16 stochastic
}
BENCHMARK(BM_Add)->Apply(formats_and_modes);
BENCHMARK(BM_Mul)->Apply(formats_and_modes);
BENCHMARK(BM_Fma)->Apply(formats_and_modes);
BENCHMARK(BM_Div)->Args({0, 0})->Args({1, 0})->Args({2, 0});
BENCHMARK(BM_Sqrt)->Args({0, 0})->Args({1, 0})->Args({2, 0});

// Sequential sum of 4096 values in a format through add_in (operands checked, result decoded):
// the pattern of an accumulation model that sums in bf16 or fp32.
void BM_AccumulateAddIn(benchmark::State& state) {
  const Format f = format_by_name(kFormats[state.range(0)]);
  const auto codes = operands(f, 3);
  std::vector<double> values(kN);
  for (size_t i = 0; i < kN; ++i) values[i] = decode(f, codes[i]);
  QuantOptions o;
  o.rounding = state.range(1) ? Rounding::kStochastic : Rounding::kNearestEven;
  for (auto _ : state) {
    double acc = 0;
    for (size_t i = 0; i < kN; ++i) acc = add_in(f, acc, values[i], o, nullptr, i);
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kN));
  state.SetLabel(f.name + (state.range(1) ? " stochastic" : " nearest-even"));
}
BENCHMARK(BM_AccumulateAddIn)->Args({1, 0})->Args({2, 0})->Args({2, 1});

}  // namespace
}  // namespace precsim

BENCHMARK_MAIN();

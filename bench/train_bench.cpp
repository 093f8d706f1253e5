// One training step (forward, backward, optimizer) of an MLP 512-1024-1024-10 on a batch of 256,
// per recipe; the fp32 variant with the reproducible FP32 sequential AccumModel is the baseline.
// Statistics (QuantStats per role) are on, as in `precsim train`.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "precsim/sim/model/mlp.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/mlp_trainer.h"

namespace precsim {
namespace {

constexpr int kIn = 512, kOut = 10, kBatch = 256;

void step_bench(benchmark::State& state, const std::string& preset, const std::string& accum) {
  Recipe r = recipe_preset(preset);
  for (GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad}) g->accum = accum_spec(accum);
  MlpConfig mc;
  mc.hidden = {1024, 1024};
  const MlpLayout l = make_mlp_layout(mc, kIn, kOut);
  OptimizerConfig opt;
  Trainer<float> tr(l, &r, opt, Task::kClassification, 1, 1 << 20);
  RunState<float> s = tr.init_state(init_mlp(l, mc, 1));
  std::vector<double> x(size_t(kBatch) * kIn);
  fill_normal(std::span<double>(x), 1, 2);
  std::vector<int32_t> y(kBatch);
  for (int i = 0; i < kBatch; ++i) y[i] = i % kOut;
  const BatchView b{x.data(), y.data(), nullptr, kBatch};
  int64_t step = 0;
  tr.step(s, b, step++);  // pre-fault every buffer
  for (auto _ : state) benchmark::DoNotOptimize(tr.step(s, b, step++).loss);
  const double macs = 3.0 * kBatch * (double(kIn) * 1024 + 1024.0 * 1024 + 1024.0 * kOut);
  state.counters["GMAC/s"] = benchmark::Counter(macs * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(step_bench, fp32_fp32seq, std::string("fp32"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, bf16amp_fp32seq, std::string("bf16-amp"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, fp8delayed_fp32seq, std::string("fp8-delayed"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, mxfp8_fp32seq, std::string("mxfp8"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, mxfp4_fp32seq, std::string("mxfp4"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, nvfp4_fp32seq, std::string("nvfp4"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, bf16amp_h100, std::string("bf16-amp"), std::string("h100"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace precsim

BENCHMARK_MAIN();

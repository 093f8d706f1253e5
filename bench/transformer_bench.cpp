// One training step (forward, backward, optimizer) of the tiny-gpt transformer shape (2 blocks,
// width 64, 4 heads, context 32, batch 16 sequences of the copy task), per recipe; the fp32
// variant with the reproducible FP32 sequential AccumModel is the baseline, and the FP64
// reference (gemm_f64) is shown beside it. Statistics are on, as in `precsim train`.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "precsim/sim/data/data.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/train/transformer_trainer.h"

namespace precsim {
namespace {

constexpr int kBatch = 16;

struct Shape {
  TransformerConfig model;
  SeqDataset data;
  TransformerLayout layout;
  SeqBatch batch;
  Shape() {
    model.layers = 2;
    model.heads = 4;
    model.width = 64;
    model.context = 32;
    SeqDataConfig dc;
    dc.min_length = dc.max_length = 16;  // every position real: a full 32-token context
    dc.train_size = kBatch;
    dc.heldout_size = 1;
    data = make_seq_dataset(dc, model.context, 1);
    layout = make_transformer_layout(model, data.vocab);
    std::vector<int> rows(kBatch);
    for (int i = 0; i < kBatch; ++i) rows[i] = i;
    gather_rows(batch, data, rows);
  }
  // Multiply-adds of the linear layers, attention and logits of one forward pass, times 3 for a step.
  double macs() const {
    const double rows = double(kBatch) * model.context, C = model.width, T = model.context;
    const double per_block = rows * (3 * C * C + C * C + 2 * 4 * C * C) + 2 * rows * T * C;
    return 3 * (model.layers * per_block + rows * C * layout.vocab);
  }
};

template <class T>
void run_steps(benchmark::State& state, TransformerTrainer<T>& tr, RunState<T>& s, const Shape& sh) {
  int64_t step = 0;
  tr.step(s, sh.batch, step++);  // pre-fault every buffer
  for (auto _ : state) benchmark::DoNotOptimize(tr.step(s, sh.batch, step++).loss);
  state.counters["GMAC/s"] = benchmark::Counter(sh.macs() * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void step_bench(benchmark::State& state, const std::string& preset, const std::string& accum) {
  const Shape sh;
  Recipe r = recipe_preset(preset);
  for (GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad}) g->accum = accum_spec(accum);
  OptimizerConfig opt;
  TransformerTrainer<float> tr(sh.layout, &r, opt, 1, 1 << 20);
  RunState<float> s = tr.init_state(init_transformer(sh.layout, sh.model, 1));
  run_steps(state, tr, s, sh);
}

void reference_bench(benchmark::State& state) {
  const Shape sh;
  OptimizerConfig opt;
  TransformerTrainer<double> tr(sh.layout, nullptr, opt, 1, 1 << 20);
  RunState<double> s = tr.init_state(init_transformer(sh.layout, sh.model, 1));
  run_steps(state, tr, s, sh);
}

BENCHMARK_CAPTURE(step_bench, fp32_fp32seq, std::string("fp32"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, bf16amp_fp32seq, std::string("bf16-amp"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, fp16amp_fp32seq, std::string("fp16-amp"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, fp8delayed_fp32seq, std::string("fp8-delayed"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, fp8blockwise_fp32seq, std::string("fp8-blockwise"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(step_bench, mxfp8_fp32seq, std::string("mxfp8"), std::string("fp32-seq"))->Unit(benchmark::kMillisecond);
BENCHMARK(reference_bench)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace precsim

BENCHMARK_MAIN();

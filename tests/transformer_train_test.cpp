// The transformer trained in the FP64 reference and in recipes: the reference learns every
// synthetic task, bf16-amp tracks it, FP16 attention scores overflow where FP32 ones do not, and
// per-tensor FP8 scaling loses more to an injected activation outlier than per-row or 1x128 tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include <nlohmann/json.hpp>

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/data_json.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/train/transformer_trainer.h"

namespace precsim {
namespace {

struct Experiment {
  TransformerConfig model;
  SeqDataConfig data;
  OptimizerConfig opt;
  int batch = 16;
  uint64_t seed = 1;
  Experiment() {
    model.layers = 2;
    model.heads = 2;
    model.width = 32;
    model.context = 12;
    data.symbols = 6;
    data.min_length = 2;
    data.max_length = 6;
    data.train_size = 1024;
    data.heldout_size = 128;
    opt.lr = 3e-3;
  }
};

// Reference and variants stepped in lockstep on the same batches from the same weights.
struct Lockstep {
  SeqDataset data;
  TransformerLayout layout;
  std::vector<double> init;
  TransformerTrainer<double> ref;
  RunState<double> ref_state;
  std::vector<std::unique_ptr<TransformerTrainer<float>>> trainers;
  std::vector<RunState<float>> states;
  SeqBatch batch;
  std::vector<int> idx;

  Lockstep(const Experiment& s, const std::vector<const Recipe*>& recipes, int64_t steps)
      : data(make_seq_dataset(s.data, s.model.context, s.seed)),
        layout(make_transformer_layout(s.model, data.vocab)),
        init(init_transformer(layout, s.model, s.seed)),
        ref(layout, nullptr, s.opt, s.seed, steps),
        ref_state(ref.init_state(init)) {
    for (const Recipe* r : recipes) {
      trainers.push_back(std::make_unique<TransformerTrainer<float>>(layout, r, s.opt, s.seed, steps));
      states.push_back(trainers.back()->init_state(init));
    }
  }
  void next_batch(int b, uint64_t seed, int64_t step) {
    batch_indices(idx, data.train_rows, b, seed, uint64_t(step));
    gather_rows(batch, data, idx);
  }
};

class ReferenceLearns : public ::testing::TestWithParam<const char*> {};

// Initial loss ln(8) = 2.08 (6 symbols, SEP, PAD); a model that learns nothing of the task but the
// symbol frequencies stays near ln(6) = 1.79. 300 AdamW steps must bring the held-out token loss
// below 0.5 and next-token accuracy above 80% on every task.
TEST_P(ReferenceLearns, HeldOutLossAndAccuracy) {
  Experiment s;
  s.data.kind = seq_data_config_from_json({{"kind", GetParam()}}).kind;  // the name as a config spells it
  if (s.data.kind == SeqTask::kModAdd) s.data.min_length = s.data.max_length = 2;  // (a + b) mod 6
  const int64_t steps = 300;
  Lockstep run(s, {}, steps);
  double first = 0;
  for (int64_t step = 0; step < steps; ++step) {
    run.next_batch(s.batch, s.seed, step);
    const StepStats st = run.ref.step(run.ref_state, run.batch, step);
    if (step == 0) first = st.loss;
  }
  const EvalResult e = run.ref.evaluate(run.ref_state, run.data);
  std::printf("%s: first %.4f heldout %.4f acc %.4f\n", GetParam(), first, e.loss, e.accuracy);
  EXPECT_NEAR(first, std::log(8.0), 0.2);
  EXPECT_LT(e.loss, 0.5) << GetParam();
  EXPECT_GT(e.accuracy, 0.8) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Tasks, ReferenceLearns, ::testing::Values("copy", "reverse", "sort", "modadd"));

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The gradient of variant i at the reference's weights (before this step's update), with the
// variant's own state otherwise; nothing of the shadow step is kept.
std::vector<double> shadow_grad(Lockstep& run, size_t i, const std::vector<double>& ref_weights, int64_t step) {
  RunState<float> sh = run.states[i].clone();
  sh.weights.assign(ref_weights.begin(), ref_weights.end());
  std::vector<float> g;
  run.trainers[i]->step(sh, run.batch, step, &g);
  return to_double(g);
}

TEST(TransformerTrain, Bf16AmpTracksTheReference) {
  Experiment s;
  s.data.kind = SeqTask::kCopy;
  const int64_t steps = 150;
  const Recipe bf16 = recipe_preset("bf16-amp");
  Lockstep run(s, {&bf16}, steps);
  std::vector<double> ref_loss, bf_loss, grad_err;
  std::vector<double> ref_grad;
  for (int64_t step = 0; step < steps; ++step) {
    run.next_batch(s.batch, s.seed, step);
    const std::vector<double> before = run.ref_state.weights;
    ref_loss.push_back(run.ref.step(run.ref_state, run.batch, step, &ref_grad).loss);
    if (step % 10 == 0) grad_err.push_back(rel_error(shadow_grad(run, 0, before, step), ref_grad));
    bf_loss.push_back(run.trainers[0]->step(run.states[0], run.batch, step).loss);
  }
  double gap = 0, err = 0;
  for (int i = 0; i < 20; ++i) gap += (bf_loss[steps - 1 - i] - ref_loss[steps - 1 - i]) / 20;
  for (double e : grad_err) err += e / double(grad_err.size());
  const EvalResult er = run.ref.evaluate(run.ref_state, run.data), eb = run.trainers[0]->evaluate(run.states[0], run.data);
  std::printf("bf16: ref %.4f bf16 %.4f gap %.5f grad err %.4g heldout %.6f vs %.6f\n", ref_loss.back(), bf_loss.back(),
              gap, err, er.loss, eb.loss);
  // Measured: gap -0.00064 (docs/transformer.md's "within 0.003"), held-out 0.00534, gradient error 0.0145
  // (with the optimizer rounding as torch.optim does; before, one rounding more: 0.00243, 0.00297).
  EXPECT_LT(std::fabs(gap), 0.003);
  EXPECT_LT(std::fabs(eb.loss - er.loss), 0.008);
  EXPECT_LT(err, 0.022);
  EXPECT_GT(err, 0.0097);  // bf16 is not exact: the shadow gradient does differ
}

TEST(TransformerTrain, Fp16ScoresOverflowWhereFp32ScoresDoNot) {
  Experiment s;
  s.data.kind = SeqTask::kCopy;
  s.model.qk_init_scale = 100;  // query and key weights 100x: logits of order 4e4 and beyond
  Recipe in16 = recipe_preset("fp16-amp");
  in16.name = "fp16-scores";
  Recipe in32 = in16;
  in32.name = "fp32-scores";
  in32.attention.scores = TensorFormat{"fp32", Rounding::kNearestEven, format_by_name("fp32")};
  Lockstep run(s, {&in16, &in32}, 1);
  run.next_batch(s.batch, s.seed, 0);
  const StepStats rs = run.ref.step(run.ref_state, run.batch, 0);
  const StepStats s16 = run.trainers[0]->step(run.states[0], run.batch, 0);
  const TransformerLayerStats l16 = run.trainers[0]->last_layer_stats()[0];
  const StepStats s32 = run.trainers[1]->step(run.states[1], run.batch, 0);
  const TransformerLayerStats l32 = run.trainers[1]->last_layer_stats()[0];
  const TransformerLayerStats lref = run.ref.last_layer_stats()[0];
  std::printf("ref amax %.4g; fp16 scores: overflow %llu/%llu loss %g skipped %d; fp32 scores: overflow %llu loss %.9g (ref %.9g) skipped %d\n",
              lref.score_amax, (unsigned long long)l16.score_overflow, (unsigned long long)l16.score_count, s16.loss,
              s16.skipped, (unsigned long long)l32.score_overflow, s32.loss, rs.loss, s32.skipped);
  EXPECT_GT(lref.score_amax, 65504.0);  // the FP64 logits themselves exceed FP16's largest finite value
  EXPECT_GT(l16.score_overflow, 0u);
  EXPECT_FALSE(std::isfinite(s16.loss));
  EXPECT_TRUE(s16.skipped);
  EXPECT_EQ(l32.score_overflow, 0u);
  EXPECT_TRUE(std::isfinite(s32.loss));
  EXPECT_NEAR(s32.loss, rs.loss, 2.4e-5);  // measured 1.6e-5 (docs/transformer.md's "to 2e-5")
}

// Per-tensor delayed scaling sets one scale by the injected outlier (position 0 of the MLP input,
// outlier_scale x), so every other token's values fall into E4M3's subnormals or to zero; per-row
// and 1x128-tile scales give each token its own scale. Measured at the reference's weights: the
// error of the forward loss and the fraction of forward GEMM operands flushed to zero.
struct ScalingError {
  double loss_err = 0, flushed = 0, fc_grad_err = 0;
};
struct OutlierErrors {
  ScalingError tensor, row, tile;
};

OutlierErrors outlier_errors(double outlier_scale) {
  Experiment s;
  s.data.kind = SeqTask::kCopy;
  s.model.outlier_scale = outlier_scale;
  const int64_t steps = 8, measured_from = 3;  // after the amax history has seen the outlier
  const Recipe tensor = recipe_preset("fp8-delayed");
  auto with_scaling = [&](const char* name, Scaling sc, int block) {
    Recipe r = tensor;
    r.name = name;
    for (GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad})
      for (OperandSpec* op : {&g->a, &g->b}) {
        op->scaling = sc;
        op->block = block;
      }
    return r;
  };
  const Recipe row = with_scaling("fp8-rowwise", Scaling::kRowwise, 4096), tile = with_scaling("fp8-tile128", Scaling::kRowwise, 128);
  Lockstep run(s, {&tensor, &row, &tile}, steps);
  OutlierErrors e;
  ScalingError* out[3] = {&e.tensor, &e.row, &e.tile};
  const size_t fwd = size_t(Role::kGemmInForward);
  std::vector<double> ref_grad;
  for (int64_t step = 0; step < steps; ++step) {
    run.next_batch(s.batch, s.seed, step);
    const std::vector<double> before = run.ref_state.weights;
    const double ref_loss = run.ref.step(run.ref_state, run.batch, step, &ref_grad).loss;
    for (size_t i = 0; i < run.trainers.size(); ++i) {
      if (step >= measured_from) {
        RunState<float> sh = run.states[i].clone();
        sh.weights.assign(before.begin(), before.end());
        std::vector<float> g;
        const StepStats st = run.trainers[i]->step(sh, run.batch, step, &g);
        // The gradient of the MLP's first weights: the product whose input carries the outlier.
        std::vector<double> gv, gr;
        for (const BlockSlots& b : run.layout.blocks)
          for (size_t k = b.fc_w; k < b.fc_w + size_t(run.layout.hidden) * run.layout.width; ++k) {
            gv.push_back(g[k]);
            gr.push_back(ref_grad[k]);
          }
        out[i]->fc_grad_err += rel_error(gv, gr) / double(steps - measured_from);
        out[i]->loss_err += std::fabs(st.loss - ref_loss) / double(steps - measured_from);
        out[i]->flushed += double(st.roles[fwd].underflow_to_zero) / double(st.role_nonzero[fwd]) / double(steps - measured_from);
      }
      run.trainers[i]->step(run.states[i], run.batch, step);
    }
  }
  std::printf("outlier %g: loss error tensor %.4g row %.4g tile %.4g; flushed tensor %.4g row %.4g tile %.4g; fc grad %.4g %.4g %.4g\n",
              outlier_scale, e.tensor.loss_err, e.row.loss_err, e.tile.loss_err, e.tensor.flushed, e.row.flushed,
              e.tile.flushed, e.tensor.fc_grad_err, e.row.fc_grad_err, e.tile.fc_grad_err);
  return e;
}

TEST(TransformerTrain, PerTensorFp8SuffersFromOutliersMoreThanRowAndTileScaling) {
  const OutlierErrors plain = outlier_errors(1.0), spiked = outlier_errors(1e5);
  EXPECT_GT(spiked.tensor.loss_err, 3 * spiked.row.loss_err);
  EXPECT_GT(spiked.tensor.loss_err, 3 * spiked.tile.loss_err);
  EXPECT_GT(spiked.tensor.loss_err, 3 * plain.tensor.loss_err);
  EXPECT_GT(spiked.tensor.flushed, 10 * spiked.row.flushed);
  EXPECT_GT(spiked.tensor.flushed, 10 * spiked.tile.flushed);
  EXPECT_GT(spiked.tensor.fc_grad_err, 1.5 * spiked.row.fc_grad_err);
}

}  // namespace
}  // namespace precsim

// The stochastic-rounding key scheme (train/sr_keys.h): within one step key, every rounding of a
// step has its own (tensor id, role), for several layouts; step keys of steps, micro-batches and
// evaluation chunks never meet; delayed-scaling slots are distinct per GEMM operand; and the
// transformer's running tensor counter, measured on the model itself, stays below the ids outside
// the layers for far more blocks than any configuration allows.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/model/transformer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/sr_keys.h"

namespace precsim {
namespace {

using sr_keys::MlpBackward;
using sr_keys::MlpForward;
using Id = std::pair<uint32_t, Role>;

constexpr GemmPass kPasses[] = {GemmPass::kForward, GemmPass::kDgrad, GemmPass::kWgrad};

Role operand_role(GemmPass p) {
  return p == GemmPass::kForward ? Role::kGemmInForward : p == GemmPass::kDgrad ? Role::kGemmInDgrad : Role::kGemmInWgrad;
}

// Every (tensor, role) an MLP step of `layers` layers and `parts` micro-batch parts rounds with.
std::vector<Id> mlp_step_ids(int layers, int parts) {
  std::vector<Id> ids = {{sr_keys::kWeightCast, Role::kWeights},
                         {sr_keys::kLossGrad, Role::kActivationGrads},
                         {sr_keys::kOptimizerM, Role::kOptimizerState},
                         {sr_keys::kOptimizerV, Role::kOptimizerState},
                         {sr_keys::kWeightUpdate, Role::kMasterWeights},
                         {sr_keys::kWeightUpdateKahan, Role::kOptimizerState}};
  for (int l = 0; l < layers; ++l) {
    for (MlpForward p : {MlpForward::kLinearOut, MlpForward::kNormOut, MlpForward::kActivation, MlpForward::kResidual})
      ids.push_back({sr_keys::mlp_forward(l, p), Role::kActivations});
    for (GemmPass pass : kPasses)
      for (int op = 0; op < 2; ++op) ids.push_back({sr_keys::mlp_gemm(l, pass, op), operand_role(pass)});
    for (MlpBackward p : {MlpBackward::kWeightGrad, MlpBackward::kBiasGrad, MlpBackward::kNormWeightGrad,
                          MlpBackward::kNormBiasGrad})
      ids.push_back({sr_keys::mlp_backward(l, p), Role::kWeightGrads});
    for (MlpBackward p : {MlpBackward::kInputGrad, MlpBackward::kActivationGrad, MlpBackward::kNormInputGrad})
      ids.push_back({sr_keys::mlp_backward(l, p), Role::kActivationGrads});
  }
  for (int p = 0; p < parts; ++p) ids.push_back({sr_keys::grad_accum(uint32_t(p)), Role::kGradAccumulation});
  return ids;
}

TEST(SrKeys, MlpTensorIdsAreDistinctPerRole) {
  for (const auto& [layers, parts] : {std::pair{1, 1}, {3, 8}, {16, 64}, {1000, 4096}}) {
    const std::vector<Id> ids = mlp_step_ids(layers, parts);
    const std::set<Id> distinct(ids.begin(), ids.end());
    EXPECT_EQ(distinct.size(), ids.size()) << layers << " layers, " << parts << " parts";
    for (const auto& [tensor, role] : ids) {
      if (role == Role::kActivations || role == Role::kGemmInForward || role == Role::kGemmInDgrad ||
          role == Role::kGemmInWgrad) {
        EXPECT_LT(tensor, sr_keys::kLayerIdsEnd) << layers << " layers";
      }
    }
  }
}

TEST(SrKeys, StepKeysOfStepsPartsAndEvaluationAreDistinct) {
  std::set<uint64_t> keys;
  size_t n = 0;
  for (uint64_t step : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{999999}, sr_keys::kEvalStep - 1})
    for (int part = 0; part < 256; ++part, ++n) keys.insert(sr_keys::part_step(step, part));
  for (uint64_t row = 0; row < 1 << 16; row += 256, ++n) keys.insert(sr_keys::eval_step(row));
  EXPECT_EQ(keys.size(), n);
  EXPECT_EQ(sr_keys::part_step(7, 0), 7u);  // part 0 keeps the plain step
}

TEST(SrKeys, DelayedScalingSlotsAreDistinctPerOperand) {
  constexpr int kSites = static_cast<int>(TfSite::kCount);
  for (int layers : {1, 2, 12}) {
    std::set<size_t> mlp, tf;
    for (GemmPass pass : kPasses)
      for (int op = 0; op < 2; ++op) {
        for (int l = 0; l < layers; ++l) mlp.insert(sr_keys::mlp_delayed_slot(l, pass, op));
        for (int l = 0; l <= layers; ++l)  // the logits sit at layer = blocks
          for (int site = 0; site < kSites; ++site)
            tf.insert(sr_keys::transformer_delayed_slot(l, site, kSites, pass, op));
      }
    EXPECT_EQ(mlp.size(), size_t(layers) * 6);
    EXPECT_EQ(*mlp.rbegin(), size_t(layers) * 6 - 1);  // dense: RunState::delayed holds no gaps
    EXPECT_EQ(tf.size(), size_t(layers + 1) * kSites * 6);
  }
}

// Counts the ids the trainer's numerics draw: two per product, one per rounding point.
class CountingNumerics final : public Numerics<double> {
 public:
  uint32_t ids = 0;
  void gemm(const GemmCall& call, double* c, const double* a, const double* b) override {
    ids += 2;
    reference.gemm(call, c, a, b);
  }
  void round(const RoundAt&, std::span<double>) override { ++ids; }
  ReferenceNumerics reference;
};

uint32_t transformer_ids_per_part(int layers) {
  const TransformerConfig c{.layers = layers, .heads = 2, .width = 8, .context = 6};
  const SeqDataConfig dc{.kind = SeqTask::kReverse, .symbols = 3, .min_length = 1, .max_length = 2, .train_size = 2,
                         .heldout_size = 1, .text_path = {}};
  const SeqDataset d = make_seq_dataset(dc, c.context, 3);
  const TransformerLayout l = make_transformer_layout(c, d.vocab);
  const std::vector<double> p = init_transformer(l, c, 11);
  SeqBatch batch;
  gather_rows(batch, d, {0, 1});
  const TokenBatch b = batch.view(2, c.context);
  CountingNumerics nx;
  TransformerActs<double> acts;
  transformer_forward(acts, p.data(), l, b, nx);
  std::vector<double> g(l.param_count, 0.0);
  transformer_backward(g.data(), acts, p.data(), l, b, 1.0, nx);
  return nx.ids;
}

TEST(SrKeys, TransformerCounterStaysBelowTheFixedIds) {
  const uint32_t one = transformer_ids_per_part(1), two = transformer_ids_per_part(2),
                 twelve = transformer_ids_per_part(12);
  const uint32_t per_block = two - one;
  ASSERT_GT(per_block, 0u);
  EXPECT_EQ(twelve, one + 11 * per_block);  // linear in the blocks
  EXPECT_LT(twelve, sr_keys::kLayerIdsEnd);
  // Blocks the counter could hold before reaching the weight cast's id: far beyond any model here.
  EXPECT_GT((sr_keys::kLayerIdsEnd - one) / per_block, 10000u);
}

}  // namespace
}  // namespace precsim

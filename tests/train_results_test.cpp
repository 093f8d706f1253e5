// run_training's typed results (train_results.h) and their one JSON edge: the JSON holds the
// structs' numbers, an empty series is {}, the aggregation is the mean over the seeds' summaries,
// and run_training_json is the same JSON as train_results_json of the structs.
#include <gtest/gtest.h>

#include <limits>

#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/train_results.h"

namespace precsim {
namespace {

using nlohmann::json;

TrainConfig small_config(int shadow_every) {
  return train_config_from_json({{"steps", 12},
                                 {"batch", 16},
                                 {"seeds", 2},
                                 {"shadow_every", shadow_every},
                                 {"data", {{"train_size", 64}, {"heldout_size", 16}, {"features", 8}}},
                                 {"model", {{"hidden", {8}}}},
                                 {"recipes", {"fp32", "bf16-pure", "accum16-bf16-buffer"}}});
}

TEST(TrainResults, TheJsonHoldsTheStructsNumbers) {
  const TrainConfig c = small_config(3);
  const TrainResults r = run_training(c);
  const json j = train_results_json(r);
  ASSERT_EQ(r.runs.size(), 2u);
  ASSERT_EQ(j.at("runs").size(), 2u);
  EXPECT_EQ(j.at("parameters").get<size_t>(), r.parameters);
  EXPECT_EQ(r.parameters, size_t(8 * 8 + 8 + 8 * 10 + 10));
  for (size_t s = 0; s < 2; ++s) {
    const SeedResults& run = r.runs[s];
    const json& jr = j.at("runs").at(s);
    EXPECT_EQ(run.seed, uint64_t(1 + s));
    EXPECT_EQ(run.steps_completed, 12);
    EXPECT_EQ(read_number(jr.at("reference").at("heldout_loss")), run.reference.heldout_loss);
    EXPECT_EQ(jr.at("reference").at("series").at("loss").size(), run.reference.series.loss.size());
    ASSERT_EQ(run.variants.size(), 3u);
    for (size_t v = 0; v < 3; ++v) {
      const VariantRunResults& vr = run.variants[v];
      const json& jv = jr.at("variants").at(v);
      EXPECT_EQ(jv.at("name").get<std::string>(), vr.name);
      EXPECT_EQ(read_number(jv.at("summary").at("final_loss")), vr.summary.final_loss);
      EXPECT_EQ(read_number(jv.at("summary").at("loss_gap")), vr.summary.final_loss - run.reference.final_loss);
      EXPECT_EQ(jv.at("summary").at("skipped_steps").get<uint64_t>(), vr.summary.skipped_steps);
      EXPECT_TRUE(jv.at("summary").at("diverged_at").is_null());
      // Shadow steps 0, 3, 6, 9; every column of a series as long as its steps.
      EXPECT_EQ(vr.local.step, (std::vector<double>{0, 3, 6, 9}));
      EXPECT_EQ(vr.local.grad_rel_err.size(), 4u);
      EXPECT_EQ(jv.at("local").at("grad_rel_err").size(), 4u);
      EXPECT_EQ(jv.at("series").at("loss").size(), vr.series.step.size());
      EXPECT_EQ(vr.series.step.size(), 12u);  // 12 steps: every step is logged
    }
    // The split variant (1 worker x 16 micro-batches in a BF16 buffer) has a split error; fp32 has none.
    EXPECT_EQ(run.variants[0].summary.local_split_grad_rel_err, 0.0);
    EXPECT_GT(run.variants[2].summary.local_split_grad_rel_err, 0.0);
    EXPECT_FALSE(run.variants[0].layers.has_value());
  }
  // The aggregation: the mean of the two seeds' summaries, with an interval around it.
  ASSERT_EQ(r.variants.size(), 3u);
  for (size_t v = 0; v < 3; ++v) {
    const double a = r.runs[0].variants[v].summary.heldout_loss, b = r.runs[1].variants[v].summary.heldout_loss;
    const MeanCi& m = r.variants[v].summary[1];
    EXPECT_STREQ(kSummaryNumberNames[1], "heldout_loss");
    EXPECT_DOUBLE_EQ(m.mean, (a + b) / 2);
    EXPECT_LE(m.lo, m.mean);
    EXPECT_GE(m.hi, m.mean);
    EXPECT_EQ(read_number(j.at("variants").at(v).at("summary").at("heldout_loss")), m.mean);
    EXPECT_EQ(j.at("variants").at(v).at("summary").at("diverged_at"), json::array({nullptr, nullptr}));
    EXPECT_TRUE(j.at("variants").at(v).contains("summary_ci95"));
  }
  EXPECT_EQ(r.variants[2].micro_batches, 16);
  EXPECT_GT(r.variants[2].memory_bytes.accumulation_buffer, 0.0);
  EXPECT_EQ(j.at("variants").at(2).at("memory_bytes").at("total").get<double>(), r.variants[2].memory_bytes.total);
}

TEST(TrainResults, NoShadowStepsWriteAnEmptyLocalSeries) {
  const TrainResults r = run_training(small_config(0));
  const json j = r;  // the to_json conversion is train_results_json
  EXPECT_EQ(j, train_results_json(r));
  EXPECT_TRUE(r.runs[0].variants[1].local.step.empty());
  EXPECT_EQ(j.at("runs").at(0).at("variants").at(1).at("local"), json::object());
  EXPECT_EQ(read_number(j.at("runs").at(0).at("variants").at(1).at("summary").at("local_split_grad_cosine")), 1.0);
}

TEST(TrainResults, RunTrainingJsonIsTheJsonOfTheStructs) {
  const TrainConfig c = small_config(4);
  EXPECT_EQ(run_training_json(c).dump(), train_results_json(run_training(c)).dump());
}

TEST(TrainResults, ALoggedStepRecordHoldsTheLastValueOfEachSeries) {
  VariantSeries s;
  s.step = {0, 5};
  s.loss = {2.0, 1.5};
  s.loss_gap = {0.0, 0.25};
  s.weight_distance = {0.0, 1e-3};
  s.drift_over_chaos_floor = {0.0, std::numeric_limits<double>::infinity()};
  s.grad_cosine_vs_reference = {1.0, 0.99};
  s.loss_scale = {1.0, 1.0};
  s.skipped_steps = {0.0, 1.0};
  s.stagnation = {0.0, 0.5};
  const json rec = logged_step_json(s, 3, 5, "bf16");
  EXPECT_EQ(rec.at("seed").get<uint64_t>(), 3u);
  EXPECT_EQ(rec.at("step").get<int64_t>(), 5);
  EXPECT_EQ(rec.at("variant"), "bf16");
  EXPECT_EQ(rec.at("loss_gap").get<double>(), 0.25);
  EXPECT_EQ(rec.at("drift_over_chaos_floor"), "inf");
  EXPECT_EQ(rec.at("stagnation").get<double>(), 0.5);
  EXPECT_EQ(rec.size(), 11u);  // seed, step, variant and the 8 series but step
}

}  // namespace
}  // namespace precsim

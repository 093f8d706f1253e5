// run_training's hooks: a run stopped early holds exactly the steps a full run computed up to that
// point (same bits), says how far it got, and the per-step records (the --jsonl stream) carry the
// same values as the report's series.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

using nlohmann::json;

TrainConfig config(int seeds) {
  return train_config_from_json(json::parse(R"({
    "steps": 40, "batch": 16, "seed": 5, "shadow_every": 5, "log_every": 3, "eval_every": 10,
    "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
    "model": {"hidden": [16]},
    "optimizer": {"kind": "sgd", "lr": 0.05},
    "recipes": ["fp32", "bf16-amp"], "seeds": )" + std::to_string(seeds) + "}"));
}

// Stops before step `at` of the first seed has run: steps 0..at complete.
RunHooks stop_at(int64_t at, std::vector<json>* records) {
  RunHooks h;
  auto polls = std::make_shared<int64_t>(0);
  h.stop = [polls, at] { return (*polls)++ == at; };
  if (records) h.on_logged_step = [records](const json& r) { records->push_back(r); };
  return h;
}

TEST(TrainHooks, StoppedRunKeepsTheFinishedStepsBitForBit) {
  const TrainConfig c = config(1);
  const json full = run_training(c);
  EXPECT_EQ(full["runs"][0]["steps_completed"], 40);
  const json part = run_training(c, stop_at(16, nullptr));  // steps 0..16 run
  ASSERT_EQ(part["runs"].size(), 1u);
  EXPECT_EQ(part["runs"][0]["steps_completed"], 17);
  for (size_t vi = 0; vi < 2; ++vi) {
    const json& fs = full["runs"][0]["variants"][vi]["series"];
    const json& ps = part["runs"][0]["variants"][vi]["series"];
    // Logged every 3 steps, plus the step the stop arrived at (16): 0, 3, ..., 15, 16.
    const std::vector<int> want_steps = {0, 3, 6, 9, 12, 15, 16};
    ASSERT_EQ(ps["step"].size(), want_steps.size());
    for (size_t i = 0; i < want_steps.size(); ++i) EXPECT_EQ(ps["step"][i], want_steps[i]);
    for (const char* key : {"loss", "loss_gap", "weight_distance", "loss_scale"})
      for (size_t i = 0; i + 1 < want_steps.size(); ++i) EXPECT_EQ(ps[key][i], fs[key][i]) << key << " point " << i;
    // The shadow steps (every 5) up to step 16 match too: 0, 5, 10, 15.
    const json& pl = part["runs"][0]["variants"][vi]["local"];
    ASSERT_EQ(pl["step"].size(), 4u);
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(pl["grad_rel_err"][i], full["runs"][0]["variants"][vi]["local"]["grad_rel_err"][i]);
    // Held-out evaluations at 10 and at the last finished step (17 steps done).
    const json& pe = part["runs"][0]["variants"][vi]["evals"]["step"];
    EXPECT_EQ(pe, json({10, 17}));
  }
}

TEST(TrainHooks, StopEndsTheSeedLoopAndRecordsMatchTheSeries) {
  const TrainConfig c = config(3);
  std::vector<json> records;
  const json part = run_training(c, stop_at(2, &records));
  ASSERT_EQ(part["runs"].size(), 1u);  // later seeds never start
  EXPECT_EQ(part["runs"][0]["steps_completed"], 3);
  EXPECT_EQ(part["variants"][0]["summary"]["diverged_at"], json({nullptr}));
  // Steps 0 and 2 (the stop), two variants each, in step order then variant order.
  ASSERT_EQ(records.size(), 4u);
  const char* names[] = {"fp32", "bf16-amp"};
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    EXPECT_EQ(r["seed"], 5);
    EXPECT_EQ(r["step"], i < 2 ? 0 : 2);
    EXPECT_EQ(r["variant"], names[i % 2]);
    const json& s = part["runs"][0]["variants"][i % 2]["series"];
    for (const auto& [key, values] : s.items()) {
      if (key == "step") continue;
      EXPECT_EQ(r[key], values[i / 2]) << key;
    }
  }
  // A full multi-seed run records every seed's steps.
  std::vector<json> all;
  RunHooks h;
  h.on_logged_step = [&all](const json& r) { all.push_back(r); };
  const json full = run_training(c, h);
  EXPECT_EQ(full["runs"].size(), 3u);
  // Logged steps 0, 3, ..., 39: 14 per seed and variant.
  EXPECT_EQ(all.size(), 3u * 2u * 14u);
  EXPECT_EQ(all.back()["seed"], 7);
  EXPECT_EQ(all.back()["step"], 39);
}

}  // namespace
}  // namespace precsim

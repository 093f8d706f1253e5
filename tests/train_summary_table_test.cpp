// The train table and its findings say what the numbers of the run say: every cell is the
// results' number, the reference row is the FP64 run's, accuracy appears only for classification,
// and each finding line appears exactly when its condition holds in the results.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/train_findings.h"

namespace precsim {
namespace {

using nlohmann::json;

json small_gradients(json recipes, int steps, int seeds) {
  std::ifstream in(std::string(PRECSIM_SOURCE_DIR) + "/tests/data/fp16_small_gradients.json");
  json c = json::parse(in);
  c["recipes"] = std::move(recipes);
  c["steps"] = steps;
  c["seeds"] = seeds;
  return c;
}

bool has_line(const std::vector<std::string>& f, const std::string& text) {
  for (const auto& l : f)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

TEST(TrainSummaryTable, RowsAndFindingsAreTheResultsNumbers) {
  const json r = run_training(train_config_from_json(small_gradients({"fp32", "fp16-noscale", "bf16-pure"}, 60, 1)));
  const TrainSummary s = train_summary_from_json(r);
  ASSERT_EQ(s.variants.size(), 3u);
  EXPECT_FALSE(s.classification);  // a teacher-student regression
  EXPECT_EQ(s.ref_final_loss, read_number(r["runs"][0]["reference"]["final_loss"]));
  const std::vector<std::string> f = train_findings(s);
  for (size_t i = 0; i < 3; ++i) {
    const json& sum = r["variants"][i]["summary"];
    const VariantRow& row = s.variants[i];
    EXPECT_EQ(row.name, r["variants"][i]["name"]);
    EXPECT_EQ(row.loss_gap.mean, read_number(sum["loss_gap"]));
    EXPECT_FALSE(row.loss_gap.ci95.has_value());
    const double uf = read_number(sum["underflow_fraction"]), st = read_number(sum["stagnation_fraction"]);
    EXPECT_EQ(row.underflow_fraction, uf);
    EXPECT_EQ(has_line(f, fmt::format("{} flushes {:.3g}% of its gradient values", row.name, 100 * uf)), uf > 0)
        << row.name;
    EXPECT_EQ(has_line(f, fmt::format("{} stagnates: {:.3g}%", row.name, 100 * st)), st >= 0.01) << row.name;
  }
  // The run shows what the findings are for: FP16 without scaling flushes, pure BF16 stagnates.
  EXPECT_GT(s.variants[1].underflow_fraction, 0);
  EXPECT_GE(s.variants[2].stagnation_fraction, 0.01);
  EXPECT_TRUE(has_line(f, "1 seed: no interval"));
  const std::string t = train_summary_table(s);
  EXPECT_EQ(t.find(" acc "), std::string::npos);
  EXPECT_NE(t.find(fmt::format("fp64 (reference) {:>10.4g}", s.ref_final_loss)), std::string::npos) << t;
  EXPECT_EQ(train_summary_legend(s).find("  acc "), std::string::npos);
}

TEST(TrainSummaryTable, GapFindingFollowsTheIntervalAndTheChaosFloor) {
  json c = {{"steps", 60},
            {"batch", 64},
            {"seeds", 3},
            {"shadow_every", 10},
            {"data", {{"features", 16}, {"classes", 4}, {"train_size", 512}, {"heldout_size", 128}}},
            {"model", {{"hidden", {32}}}},
            {"recipes", {"fp32", "bf16-amp", "mxfp4"}}};
  const json r = run_training(train_config_from_json(c));
  const TrainSummary s = train_summary_from_json(r);
  EXPECT_TRUE(s.classification);
  EXPECT_EQ(s.seeds, 3);
  double chaos = 0;
  for (const auto& run : r["runs"]) {
    const json& ser = run["reference"]["series"];
    chaos += std::fabs(read_number(ser["chaos_loss"].back()) - read_number(ser["loss"].back())) / 3;
  }
  EXPECT_DOUBLE_EQ(s.loss_chaos_floor, chaos);
  const std::vector<std::string> f = train_findings(s);
  std::string outside;
  for (const auto& l : f)
    if (l.starts_with("loss gap outside")) outside = l;
  int stands_out = 0;
  for (const auto& v : r["variants"]) {
    const double lo = read_number(v["summary_ci95"]["loss_gap"][0]), hi = read_number(v["summary_ci95"]["loss_gap"][1]);
    const double mean = read_number(v["summary"]["loss_gap"]);
    const bool out = (lo > 0 || hi < 0) && std::fabs(mean) > chaos;
    stands_out += out;
    const bool listed = outside.find(": " + v["name"].get<std::string>() + " ") != std::string::npos ||
                        outside.find(", " + v["name"].get<std::string>() + " ") != std::string::npos;
    EXPECT_EQ(listed, out) << v["name"] << ": " << outside;
  }
  EXPECT_GE(stands_out, 1);  // MXFP4 pays a gap far outside three seeds' noise
  const std::string t = train_summary_table(s);
  EXPECT_NE(t.find(" acc "), std::string::npos);
  EXPECT_NE(t.find("±"), std::string::npos);
}

}  // namespace
}  // namespace precsim

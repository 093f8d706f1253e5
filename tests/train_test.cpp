// The side-by-side runner on small problems: the reference learns, fp32 stays at FP32 rounding and
// near the chaos floor, the classic FP16/BF16 effects show, reports are reproducible across thread
// counts, and bad input fails fast with exit code 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <nlohmann/json.hpp>

#include "../support/cli_run.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

using nlohmann::json;

json small_config() {
  return json::parse(R"({
    "steps": 150, "batch": 32, "seed": 3, "shadow_every": 10,
    "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 1024,
             "heldout_size": 256, "separation": 1.0},
    "model": {"hidden": [32, 32]},
    "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9},
    "recipes": ["fp32"]})");
}

const json& variant(const json& results, const std::string& name) {
  for (const auto& v : results["variants"])
    if (v["name"] == name) return v["summary"];
  throw std::runtime_error("no variant " + name);
}
double num(const json& s, const char* k) { return read_number(s[k]); }

TEST(Train, ReferenceLearnsAndFp32StaysAtRoundingAndNearTheChaosFloor) {
  const json r = run_training(train_config_from_json(small_config()));
  const json& ref = r["runs"][0]["reference"];
  EXPECT_LT(num(ref, "final_loss"), 0.5 * num(ref, "initial_loss"));
  const json& s = variant(r, "fp32");
  // FP32 rounding of a few hundred operations: relative gradient error around 1e-7.
  EXPECT_LT(num(s, "local_grad_rel_err"), 1e-5);
  EXPECT_GT(num(s, "local_grad_rel_err"), 1e-9);  // it does round: not the reference itself
  EXPECT_GT(num(s, "local_grad_cosine"), 1 - 1e-9);
  // Global drift of FP32 against the FP64 reference, in units of the chaos floor (an FP64 run one
  // FP32 ulp away): the same order of magnitude.
  EXPECT_LT(num(s, "drift_over_chaos_floor"), 30);
  EXPECT_GT(num(s, "chaos_floor"), 0);
  EXPECT_LT(std::fabs(num(s, "loss_gap")), 1e-5);
}

TEST(Train, Fp16WithoutScalingFlushesSmallGradientsThatDynamicScalingKeeps) {
  // Small gradients: a deep MLP initialised small, so that gradients reaching the first layers are
  // far below FP16's smallest subnormal (6e-8) unless the loss is scaled.
  json c = small_config();
  c["model"] = {{"hidden", {32, 32, 32, 32}}, {"init_scale", 0.05}};
  c["steps"] = 100;
  c["recipes"] = {"fp16-noscale", "fp16-amp"};
  const json r = run_training(train_config_from_json(c));
  const json &noscale = variant(r, "fp16-noscale"), &amp = variant(r, "fp16-amp");
  // Fractions of non-zero gradient values flushed to zero at the FP16 rounding points, and of the
  // reference's non-zero weight gradients that are zero in the variant's shadow step.
  EXPECT_GT(num(noscale, "underflow_fraction"), 0.2);
  EXPECT_LT(num(amp, "underflow_fraction"), 0.002);
  EXPECT_GT(num(noscale, "local_weight_grad_underflow"), 0.2);
  EXPECT_LT(num(amp, "local_weight_grad_underflow"), 0.01);
  EXPECT_EQ(num(amp, "skipped_steps"), 0);
}

TEST(Train, PureBf16StagnatesWhereStochasticRoundingAndKahanDoNot) {
  json c = small_config();
  c["optimizer"]["lr"] = 0.005;
  c["recipes"] = {"bf16-pure", "bf16-pure-sr", "bf16-pure-kahan"};
  const json r = run_training(train_config_from_json(c));
  const json &ne = variant(r, "bf16-pure"), &sr = variant(r, "bf16-pure-sr"), &kahan = variant(r, "bf16-pure-kahan");
  EXPECT_GT(num(ne, "stagnation_fraction"), 0.3);
  EXPECT_GT(num(ne, "loss_gap"), 4 * std::fabs(num(sr, "loss_gap")));
  EXPECT_GT(num(ne, "loss_gap"), 4 * std::fabs(num(kahan, "loss_gap")));
}

TEST(Train, DynamicScalingSkipsOverflowingStepsAndBacksOff) {
  json c = small_config();
  c["steps"] = 20;
  c["recipes"] = json::array({{{"name", "huge"}, {"preset", "fp16-amp"}, {"loss_scaling", {{"init_scale", 16777216.0}}}}});
  const json r = run_training(train_config_from_json(c));
  const json& s = variant(r, "huge");
  // 2^24 overflows FP16 gradients: every skipped step halves the scale (growth needs 2000 clean
  // steps), so the final scale is 2^(24 - skipped) exactly.
  const double skipped = num(s, "skipped_steps");
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 20);
  EXPECT_EQ(num(s, "final_loss_scale"), std::ldexp(1.0, 24 - int(skipped)));
  EXPECT_TRUE(s["diverged_at"].is_null());
}

// ---- the command line ----

using Cmd = test_support::CliRun;
Cmd run_cli(const std::string& args) { return test_support::run_precsim(args); }

std::filesystem::path tmp(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / "precsim_train_test";
  std::filesystem::create_directories(d);
  return d / name;
}

std::string write_config(const json& c, const std::string& name) {
  const auto p = tmp(name);
  std::ofstream(p) << c.dump();
  return p.string();
}

TEST(TrainCli, DeterministicReportIsByteIdenticalAtOneAndTwoThreads) {
  json c = small_config();
  c["steps"] = 40;
  c["recipes"] = {"fp32", "bf16-amp", "bf16-pure-sr", "fp8-delayed", "mxfp4"};
  const std::string cfg = write_config(c, "det.json");
  const Cmd a = run_cli("train --config " + cfg + " --json --deterministic --threads 1");
  const Cmd b = run_cli("train --config " + cfg + " --json --deterministic --threads 2");
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  // stderr (progress) is merged in; compare the JSON document only.
  const auto doc = [](const std::string& s) { return s.substr(s.find('{')); };
  EXPECT_EQ(doc(a.out), doc(b.out));
  const json j = json::parse(doc(a.out));
  EXPECT_EQ(j["kind"], "train");
  EXPECT_FALSE(j.contains("environment"));
  EXPECT_EQ(j["config"]["recipes"][1]["weights"]["format"], "bf16");
}

TEST(TrainCli, BadInputFailsFastWithExitCode2AndSaysWhy) {
  const std::string good = write_config(small_config(), "good.json");
  auto expect_error = [](const Cmd& c, const std::string& needle) {
    EXPECT_EQ(c.rc, 2) << c.out;
    EXPECT_NE(c.out.find(needle), std::string::npos) << c.out;
  };
  expect_error(run_cli("train --recipes fp32,bf17-amp --steps 1"), "unknown recipe 'bf17-amp'; known recipes: fp32");
  json c = small_config();
  c["stpes"] = 3;
  expect_error(run_cli("train --config " + write_config(c, "k.json")), "unknown config key 'stpes'; valid keys here:");
  c = small_config();
  c["model"]["hidden"] = "wide";
  expect_error(run_cli("train --config " + write_config(c, "t.json")), "model key 'hidden': expected array");
  c = small_config();
  c["recipes"] = json::array({{{"name", "x"}, {"preset", "bf16-amp"}, {"weigths", {}}}});
  expect_error(run_cli("train --config " + write_config(c, "r.json")), "unknown recipe key 'weigths'");
  expect_error(run_cli("train --config /nonexistent/x.json"), "cannot open");
  expect_error(run_cli("train --config " + good + " --out /nonexistent/dir/r.json"), "/nonexistent/dir/r.json");

  // User data: a label file that does not match the features, and NaN in the features.
  std::vector<float> x(20 * 4, 0.5f);
  std::vector<int32_t> y(19, 1);
  write_npy(tmp("x.npy"), "<f4", {20, 4}, x.data(), x.size() * 4);
  write_npy(tmp("y19.npy"), "<i4", {19}, y.data(), y.size() * 4);
  c = small_config();
  c["batch"] = 4;
  c["data"] = {{"kind", "npy"}, {"features_path", tmp("x.npy").string()}, {"labels_path", tmp("y19.npy").string()},
               {"classes", 4}};
  expect_error(run_cli("train --config " + write_config(c, "npy1.json")), "to match the 20 feature rows");
  y.push_back(1);
  x[13] = std::numeric_limits<float>::quiet_NaN();
  write_npy(tmp("xnan.npy"), "<f4", {20, 4}, x.data(), x.size() * 4);
  write_npy(tmp("y20.npy"), "<i4", {20}, y.data(), y.size() * 4);
  c["data"]["features_path"] = tmp("xnan.npy").string();
  c["data"]["labels_path"] = tmp("y20.npy").string();
  expect_error(run_cli("train --config " + write_config(c, "npy2.json")), "1 of its 80 values is NaN or Inf, the first (NaN) at row 3, column 1");
}

// A destination that cannot take the report is refused before step 1 (no progress line was
// printed), a run without --out says that nothing was saved, and one with --out says where.
TEST(TrainCli, NoFinishedRunIsLost) {
  json c = small_config();
  c["steps"] = 3;
  const std::string cfg = write_config(c, "lost.json");
  for (const std::string& bad : {std::string("/nonexistent/dir/r.json"), tmp("").string(), tmp("r.npy").string()}) {
    const Cmd r = run_cli("train --config " + cfg + " --out " + bad);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(r.out.starts_with("precsim: error: --out")) << r.out;
    EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << "refused only after training: " << r.out;
  }
  const Cmd none = run_cli("train --config " + cfg);
  EXPECT_EQ(none.rc, 0) << none.out;
  EXPECT_NE(none.out.find("nothing was saved"), std::string::npos) << none.out;
  const std::string rep = tmp("lost_report.json").string();
  const Cmd saved = run_cli("train --config " + cfg + " --out " + rep);
  EXPECT_EQ(saved.rc, 0) << saved.out;
  EXPECT_NE(saved.out.find("wrote " + rep), std::string::npos) << saved.out;
  EXPECT_EQ(saved.out.find("nothing was saved"), std::string::npos) << saved.out;
  EXPECT_TRUE(std::filesystem::exists(rep));
}

// Paths inside a config are the config's own, not the working directory's; a config without
// recipes has its other keys checked first, so that "recipies" is named.
TEST(TrainCli, ConfigDataPathsAreRelativeToTheConfig) {
  std::vector<float> x(16 * 3, 0.25f);
  std::vector<int32_t> y(16, 1);
  const auto dir = tmp("cfgdir");
  std::filesystem::create_directories(dir);
  write_npy(dir / "x.npy", "<f4", {16, 3}, x.data(), x.size() * 4);
  write_npy(dir / "y.npy", "<i4", {16}, y.data(), y.size() * 4);
  json c = small_config();
  c["steps"] = 2;
  c["batch"] = 4;
  c["data"] = {{"kind", "npy"}, {"features_path", "x.npy"}, {"labels_path", "y.npy"}, {"classes", 2}};
  std::ofstream(dir / "c.json") << c.dump();
  const Cmd ok = run_cli("train --config " + (dir / "c.json").string() + " --json");
  ASSERT_EQ(ok.rc, 0) << ok.out;
  EXPECT_EQ(json::parse(ok.out.substr(ok.out.find('{')))["config"]["data"]["features_path"], (dir / "x.npy").string());
  c.erase("recipes");
  c["recipies"] = {"fp32"};
  const Cmd typo = run_cli("train --config " + write_config(c, "typo.json"));
  EXPECT_EQ(typo.rc, 2);
  EXPECT_NE(typo.out.find("unknown config key 'recipies'"), std::string::npos) << typo.out;
}

TEST(TrainCli, NpyDataTrains) {
  std::vector<float> x(64 * 3);
  std::vector<int32_t> y(64);
  for (int i = 0; i < 64; ++i) {
    y[i] = i % 2;
    for (int f = 0; f < 3; ++f) x[i * 3 + f] = (y[i] ? 1.0f : -1.0f) + 0.1f * float((i * 7 + f * 3) % 5);
  }
  write_npy(tmp("xo.npy"), "<f4", {64, 3}, x.data(), x.size() * 4);
  write_npy(tmp("yo.npy"), "<i4", {64}, y.data(), y.size() * 4);
  json c = small_config();
  c["steps"] = 30;
  c["batch"] = 8;
  c["data"] = {{"kind", "npy"}, {"features_path", tmp("xo.npy").string()}, {"labels_path", tmp("yo.npy").string()},
               {"classes", 2}};
  const json r = run_training(train_config_from_json(c));
  EXPECT_GT(num(variant(r, "fp32"), "heldout_accuracy"), 0.9);
}

// Non-finite data is refused before any step, naming the first value by row and column; an error
// inside one recipe of a config names that recipe.
TEST(TrainCli, NonFiniteDataAndBadRecipeKeysAreNamed) {
  std::vector<float> x(16 * 3, 0.5f);
  std::vector<int32_t> y(16, 1);
  x[7 * 3 + 2] = std::nanf("");
  x[11 * 3 + 1] = INFINITY;
  write_npy(tmp("xn.npy"), "<f4", {16, 3}, x.data(), x.size() * 4);
  write_npy(tmp("yn.npy"), "<i4", {16}, y.data(), y.size() * 4);
  json c = small_config();
  c["batch"] = 4;
  c["data"] = {{"kind", "npy"}, {"features_path", tmp("xn.npy").string()}, {"labels_path", tmp("yn.npy").string()},
               {"classes", 2}};
  const Cmd nan = run_cli("train --config " + write_config(c, "nan.json"));
  EXPECT_EQ(nan.rc, 2);
  EXPECT_NE(nan.out.find("xn.npy': 2 of its 48 values are NaN or Inf, the first (NaN) at row 7, column 2"),
            std::string::npos)
      << nan.out;
  // Paths without a kind are an npy data set (the same refusal); with another kind, refused.
  c["data"].erase("kind");
  EXPECT_NE(run_cli("train --config " + write_config(c, "nokind.json")).out.find("at row 7, column 2"), std::string::npos);
  c["data"]["kind"] = "teacher-student";
  const Cmd other = run_cli("train --config " + write_config(c, "otherkind.json"));
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.out.find("are read only with data.kind 'npy'; data.kind is 'teacher-student'"), std::string::npos)
      << other.out;
  json bad = small_config();
  bad["recipes"] = {"fp32", {{"name", "mine"}, {"preset", "bf16-amp"}, {"weights", {{"format", "bf17"}}}}};
  const Cmd fmt = run_cli("train --config " + write_config(bad, "badfmt.json"));
  EXPECT_EQ(fmt.rc, 2);
  EXPECT_NE(fmt.out.find("recipe 'mine': weights.format: unknown format 'bf17'"), std::string::npos) << fmt.out;
}

}  // namespace
}  // namespace precsim

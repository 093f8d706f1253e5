// precsim attribute where the answer is known by construction: a recipe that differs from FP32 in
// one role only (leave-one-out and leave-one-in equal the whole gap, interaction 0, every other
// unit exactly 0); FP16 without loss scaling on small gradients (the gradient roles carry the gap,
// the forward roles almost nothing); an activation outlier injected into one layer of an MLP and of
// a transformer (that layer ranks first, its interval clear of the second's). Bad input exits 2
// with no report.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <nlohmann/json.hpp>

#include "../support/cli_run.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"
#include "precsim/sim/data/data.h"
#include "precsim/sim/experiment/attribution.h"
#include "precsim/sim/experiment/recipe_search.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

double num(const json& j) { return read_number(j); }
double mean(const json& unit, const char* which, const char* metric = "heldout_loss") {
  return num(unit[which][metric]["mean"]);
}
double lo(const json& unit, const char* m = "heldout_loss") { return num(unit["leave_one_out"][m]["ci95"][0]); }
double hi(const json& unit, const char* m = "heldout_loss") { return num(unit["leave_one_out"][m]["ci95"][1]); }
const json& unit_named(const json& res, const std::string& name) {
  for (const auto& u : res["units"])
    if (u["unit"] == name) return u;
  throw std::runtime_error("no unit " + name);
}

json attribute(const json& cfg, const json& recipe, const std::string& kind, const std::string& metric = "heldout_loss",
               const std::vector<std::string>& only = {}) {
  json j = cfg;
  j["recipes"] = json::array({recipe});
  const TrainConfig c = train_config_from_json(j);
  return run_attribution(c, c.variants[0], attribution_units(c, kind, only), kind, metric);
}

// tests/data/fp16_small_gradients.json (train_findings_test): gradients near FP16's subnormals.
json small_gradients(int seeds) {
  std::ifstream in(std::string(PRECSIM_SOURCE_DIR) + "/tests/data/fp16_small_gradients.json");
  json cfg = json::parse(in);
  cfg["seeds"] = seeds;
  return cfg;
}

TEST(Attribution, OneRoleAwayFromFp32ExplainsTheWholeGapWithoutInteraction) {
  // FP32 but for FP16 activation gradients without loss scaling: measured gap 5.5e-8 [3.2e-8, 7.8e-8].
  const json recipe = {{"name", "R"}, {"preset", "fp32"}, {"activation_grads", {{"format", "fp16"}}}};
  const json res = attribute(small_gradients(3), recipe, "role");
  const double gap = num(res["gap"]["heldout_loss"]["mean"]);
  ASSERT_GT(gap, 0.0);
  const json& act = unit_named(res, "activation_grads");
  EXPECT_EQ(act["rank"], 1);
  EXPECT_FALSE(act["identical"].get<bool>());
  for (const char* m : {"final_loss", "heldout_loss", "local_grad_rel_err"}) {
    EXPECT_NEAR(mean(act, "leave_one_out", m), num(res["gap"][m]["mean"]), 1e-12) << m;
    EXPECT_NEAR(mean(act, "leave_one_in", m), num(res["gap"][m]["mean"]), 1e-12) << m;
  }
  EXPECT_NEAR(num(act["share_of_gap"]), 1.0, 1e-12);
  EXPECT_NEAR(num(res["interaction"]["heldout_loss"]["mean"]), 0.0, 1e-12);
  EXPECT_NEAR(num(res["interaction"]["final_loss"]["mean"]), 0.0, 1e-12);
  for (const auto& u : res["units"]) {
    if (u["unit"] == "activation_grads") continue;
    EXPECT_TRUE(u["identical"].get<bool>()) << u["unit"];
    EXPECT_EQ(mean(u, "leave_one_out"), 0.0) << u["unit"];
    EXPECT_EQ(mean(u, "leave_one_in"), 0.0) << u["unit"];
    EXPECT_TRUE(u["indistinguishable"].get<bool>()) << u["unit"];
  }
  // Runs: the reference-aligned R and H, and nothing else (every counterfactual is one of them).
  EXPECT_EQ(res["runs_distinct"], 2);
  // The header names the chaos floor of a loss metric in loss units, and says a local metric has
  // none; the legend explains the columns and flags.
  const std::string t = attribution_table(res);
  EXPECT_NE(t.find(fmt::format("heldout_loss gap {:.4g} [{:.3g}, {:.3g}], chaos floor {:.3g}\n", gap,
                               num(res["gap"]["heldout_loss"]["ci95"][0]), num(res["gap"]["heldout_loss"]["ci95"][1]),
                               num(res["chaos_floor_loss"]))),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("flag: identical (R and H agree on the unit"), std::string::npos) << t;
  const std::string local = attribution_table(attribute(small_gradients(3), recipe, "role", "local_grad_rel_err"));
  EXPECT_NE(local.find(", no chaos floor (local_grad_rel_err is measured at the reference's weights)"), std::string::npos)
      << local;
}

TEST(Attribution, Fp16WithoutScalingOnSmallGradientsIsTheGradientRoles) {
  const json cfg = small_gradients(3);
  const json res = attribute(cfg, "fp16-noscale", "role");
  const double gap = num(res["gap"]["heldout_loss"]["mean"]);
  ASSERT_GT(gap, 0.0);
  const std::string first = res["units"][0]["unit"];
  EXPECT_TRUE(first == "activation_grads" || first == "weight_grads") << first;
  EXPECT_FALSE(res["units"][0]["indistinguishable"].get<bool>());
  for (const char* forward : {"weights", "activations"}) {
    const json& u = unit_named(res, forward);
    EXPECT_LT(std::fabs(mean(u, "leave_one_out")), 0.05 * gap) << forward;
    EXPECT_LT(std::fabs(mean(u, "leave_one_in")), 0.05 * gap) << forward;
  }
  const json& g = unit_named(res, "activation_grads");
  EXPECT_GT(mean(g, "leave_one_out"), 0.5 * gap);
}

// A Gaussian mixture whose feature 0 is the constant 100: a massive activation channel entering
// layer 0. In MXFP4 (blocks of 32 along K, here a whole row) it sets every row's scale to 2^4, so
// layer 0's other inputs (|x| < 8) round to zero in E2M1; FP32 learns around it.
json outlier_mlp_config(const std::filesystem::path& dir) {
  DataConfig d;
  d.features = 32;
  d.classes = 4;
  d.train_size = 1024;
  d.heldout_size = 256;
  const Dataset ds = make_dataset(d, 7);
  std::vector<float> x;
  std::vector<int32_t> y;
  for (const auto* part : {&ds.x_train, &ds.x_heldout})
    for (size_t i = 0; i < part->size(); ++i) x.push_back(i % 32 == 0 ? 100.0f : float((*part)[i]));
  y.insert(y.end(), ds.y_train.begin(), ds.y_train.end());
  y.insert(y.end(), ds.y_heldout.begin(), ds.y_heldout.end());
  std::filesystem::create_directories(dir);
  write_npy(dir / "x.npy", "<f4", {y.size(), 32}, x.data(), x.size() * 4);
  write_npy(dir / "y.npy", "<i4", {y.size()}, y.data(), y.size() * 4);
  return {{"steps", 120}, {"batch", 32}, {"seeds", 6}, {"shadow_every", 20},
          {"data", {{"kind", "npy"}, {"features_path", (dir / "x.npy").string()}, {"labels_path", (dir / "y.npy").string()}}},
          {"model", {{"hidden", {32, 32}}}}, {"optimizer", {{"kind", "adamw"}, {"lr", 0.003}}}};
}

TEST(Attribution, AnOutlierInOneMlpLayerRanksThatLayerFirst) {
  const auto dir = std::filesystem::temp_directory_path() / ("precsim_attr_" + std::to_string(::getpid()));
  const json cfg = outlier_mlp_config(dir);
  const json res = attribute(cfg, "mxfp4", "layer");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(res["units"].size(), 3u);
  for (const auto& u : res["units"])
    std::printf("layer %s: leave-one-out %.4g [%.4g, %.4g], share %.3f\n", u["unit"].get<std::string>().c_str(),
                mean(u, "leave_one_out"), lo(u), hi(u), num(u["share_of_gap"]));
  EXPECT_EQ(res["units"][0]["unit"], "0");
  EXPECT_GT(lo(res["units"][0]), hi(res["units"][1]));
  const json roles = attribute(outlier_mlp_config(dir), "mxfp4", "layer-role");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(roles["units"][0]["unit"], "0/activations");
  EXPECT_GT(lo(roles["units"][0]), hi(roles["units"][1]));
}

// tiny-gpt's model with a 1e5 outlier injected into block 1's first MLP product (at position 0 of
// every sequence), under per-tensor current FP8 scaling: that block's products lose the other
// tokens. The held-out loss of 60 copy steps is too noisy to rank blocks (measured: the gap's
// interval holds 0), the shadow step's gradient error at the reference's weights is not.
TEST(Attribution, AnOutlierInOneTransformerBlockRanksThatBlockFirst) {
  const json cfg = {
      {"steps", 30}, {"batch", 16}, {"seeds", 3}, {"shadow_every", 5},
      {"model", {{"type", "transformer"}, {"layers", 2}, {"heads", 2}, {"width", 32}, {"context", 12},
                 {"outlier_scale", 1e5}, {"outlier_layer", 1}}},
      {"data", {{"kind", "copy"}, {"symbols", 6}, {"min_length", 2}, {"max_length", 6}, {"train_size", 512}, {"heldout_size", 64}}},
      {"optimizer", {{"kind", "adamw"}, {"lr", 0.003}}}};
  const json res = attribute(cfg, "fp8-current", "layer", "local_grad_rel_err");
  ASSERT_EQ(res["units"].size(), 4u);
  EXPECT_EQ(res["units"][0]["unit"], "blocks.1");
  EXPECT_GT(lo(res["units"][0], "local_grad_rel_err"), hi(res["units"][1], "local_grad_rel_err"));
  // Within the block: its activations (the products' activation operands), measured 0.114
  // [0.087, 0.141] against 0.0038 [0.0011, 0.0065] for its weights.
  const json roles = attribute(cfg, "fp8-current", "layer-role", "local_grad_rel_err",
                               {"blocks.1/weights", "blocks.1/activations", "blocks.1/activation_grads", "blocks.1/weight_grads"});
  EXPECT_EQ(roles["units"][0]["unit"], "blocks.1/activations");
  EXPECT_GT(lo(roles["units"][0], "local_grad_rel_err"), hi(roles["units"][1], "local_grad_rel_err"));
}

// The search keeps the outlier layer in BF16 at every budget it passes on its way down, and a point's
// recipe, trained on its own, computes the numbers its digest names.
TEST(Search, KeepsTheOutlierLayerInTheHigherFormatAndItsPointsReproduce) {
  const auto dir = std::filesystem::temp_directory_path() / ("precsim_search_" + std::to_string(::getpid()));
  json cfg = outlier_mlp_config(dir);
  cfg["seeds"] = 2;
  cfg["recipes"] = {"bf16-amp"};
  const TrainConfig c = train_config_from_json(cfg);
  SearchOptions o;
  o.formats = {"e2m1", "bf16"};
  // Every layer but 0 in e2m1 (4.25 bits with its E8M0 scale per 32), layer 0 in BF16.
  const auto parts = search_parts(c);
  ASSERT_EQ(parts.size(), 3u);
  double macs = 0, bits = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    macs += parts[i].second;
    bits += parts[i].second * (i == 0 ? 16 : 4.25);
  }
  const double all_but_0 = bits / macs;
  o.budget = all_but_0 + 1e-9;
  const json res = run_search(c, recipe_preset("bf16-amp"), o);
  ASSERT_GE(res["points"].size(), 3u);
  int below_full = 0;
  for (const auto& p : res["points"]) {
    if (!p["on_path"].get<bool>() || num(p["cost_bits"]) >= 16) continue;
    ++below_full;
    EXPECT_EQ(p["assignment"]["0"], "bf16") << p["assignment"];
  }
  EXPECT_EQ(below_full, 2);
  const json& chosen = res["points"][res["chosen"].get<size_t>()];
  EXPECT_NEAR(num(chosen["cost_bits"]), all_but_0, 1e-9);
  EXPECT_EQ(chosen["assignment"], json({{"0", "bf16"}, {"1", "e2m1"}, {"2", "e2m1"}}));
  // Trained on its own, the chosen point's recipe gives the summaries its digest names.
  json alone = cfg;
  alone["recipes"] = {chosen["recipe"]};
  const json r = run_training(train_config_from_json(alone));
  json summaries = json::array();
  for (const auto& run : r["runs"]) summaries.push_back(run["variants"][0]["summary"]);
  EXPECT_EQ(results_digest(summaries), chosen["digest"].get<std::string>());
  o.budget = 4.2;
  EXPECT_NE([&] {
    try {
      run_search(c, recipe_preset("bf16-amp"), o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  }().find("--budget 4.2 is below the cheapest assignment (every layer in e2m1: 4.25 bits"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Attribution, BadUnitsAndRecipesWithoutAGapAreRefused) {
  const TrainConfig c = train_config_from_json({{"recipes", {"fp32"}}, {"model", {{"hidden", {8}}}}});
  EXPECT_EQ(error_of([&] { attribution_units(c, "tensor"); }),
            "--unit 'tensor' is unknown; allowed: role, gemm, layer, layer-role");
  EXPECT_EQ(error_of([&] { attribution_units(c, "layer", {"2"}); }), "--units: '2' is not a layer unit of this model; valid: 0, 1");
  EXPECT_NE(error_of([&] { attribution_units(c, "role", {"gradients"}); }).find("valid: weights, activations"), std::string::npos);
  EXPECT_NE(error_of([&] { run_attribution(c, recipe_preset("fp32"), attribution_units(c, "role"), "role"); })
                .find("recipe 'fp32' computes every role in FP32"),
            std::string::npos);
  const Recipe parts = recipe_from_json({{"preset", "fp32"}, {"keep_bf16_layers", 0.5}}, "kept");
  EXPECT_NE(error_of([&] { run_attribution(c, parts, attribution_units(c, "role"), "role"); }).find("has per-part keys"),
            std::string::npos);
}

class AttributeCli : public test_support::CliTempDirTest {};

TEST_F(AttributeCli, BadInputExitsTwoWithoutAReport) {
  const std::string out = path("a.json");
  // A recipe that differs from FP32 by a name only (e8m23 is FP32): the runs find no gap.
  const std::string cfg = path("c.json");
  std::ofstream(cfg) << R"({"steps": 4, "batch": 16, "model": {"hidden": [8]},
    "data": {"features": 8, "classes": 3, "train_size": 64, "heldout_size": 32},
    "recipes": [{"name": "same", "preset": "fp32", "weight_grads": {"format": "e8m23"}}]})";
  for (const std::string& args : std::vector<std::string>{"--experiment tiny-gpt --recipe mxfp4 --unit tensor", "--experiment tiny-gpt --recipe mxfp9",
                                 "--experiment tiny-gpt --recipe mxfp4 --unit layer --units embedding,blocks.7",
                                 "--experiment tiny-gpt --recipe fp32", "--config " + cfg + " --recipe same --seeds 2",
                                 "--config " + cfg + " --recipe mxfp4 --unit layer --units 3"}) {
    const auto r = run_split("attribute " + args + " --out " + out);
    SCOPED_TRACE(args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_NE(r.err.find("precsim: error: "), std::string::npos) << r.err;
  }
  EXPECT_NE(run_split("attribute --config " + cfg + " --recipe same").err.find("recipe 'same' has no loss gap to explain"),
            std::string::npos);
}

TEST_F(AttributeCli, SearchRefusesABudgetBelowTheCheapestAndUnknownFormats) {
  const std::string out = path("s.json");
  for (const std::string args : {"--formats e2m1,bf16 --budget 3", "--formats e2m1,bf17 --budget 8", "--formats e2m1 --budget 8"}) {
    const auto r = run_split("search --experiment tiny-gpt --steps 2 " + args + " --out " + out);
    SCOPED_TRACE(args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_NE(r.err.find("precsim: error: --"), std::string::npos) << r.err;
  }
}

// The table lists the Pareto points cheapest first, flags those whose interval holds 0, and
// --save-recipes writes them, in the same order, as a config train reads.
TEST_F(AttributeCli, SearchTableIsSortedByCostAndSavesTheRecipes) {
  const std::string cfg = path("c.json"), out = path("s.json"), saved = path("r.json");
  std::ofstream(cfg) << R"({"steps": 4, "batch": 16, "seeds": 2, "model": {"hidden": [8, 8]},
    "data": {"features": 8, "classes": 3, "train_size": 64, "heldout_size": 32}, "recipes": ["bf16-amp"]})";
  const auto r = run_split("search --config " + cfg + " --formats e2m1,e4m3,bf16 --budget 9 --out " + out +
                           " --save-recipes " + saved);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(out);
  const json res = json::parse(in)["results"];
  std::vector<std::pair<double, size_t>> pareto;
  for (size_t k = 0; k < res["points"].size(); ++k)
    if (res["points"][k]["pareto"].get<bool>()) pareto.push_back({num(res["points"][k]["cost_bits"]), k});
  std::stable_sort(pareto.begin(), pareto.end(), [](auto& a, auto& b) { return a.first < b.first; });
  ASSERT_GE(pareto.size(), 2u);
  // One table row per Pareto point, in cost order, its noise flag from the report's interval.
  std::istringstream lines(r.out);
  std::string line;
  size_t row = 0;
  while (std::getline(lines, line)) {
    // A row: the chosen mark or a blank, then the cost (below 1000 bits) right-aligned in 7 columns.
    const size_t digit = line.find_first_not_of(' ', 2);
    if (line.size() < 10 || (line[0] != '*' && line[0] != ' ') || digit == std::string::npos || digit < 3 || digit > 8 ||
        !std::isdigit(static_cast<unsigned char>(line[digit])))
      continue;
    ASSERT_LT(row, pareto.size()) << r.out;
    const json& p = res["points"][pareto[row].second];
    const json& ci = p["heldout_loss_change"]["ci95"];
    EXPECT_NEAR(std::stod(line.substr(2, 7)), pareto[row].first, 1e-3 * pareto[row].first) << line;
    EXPECT_EQ(line.find("noise") != std::string::npos, num(ci[0]) <= 0 && num(ci[1]) >= 0) << line;
    ++row;
  }
  EXPECT_EQ(row, pareto.size()) << r.out;
  EXPECT_NE(r.out.find("legend:\n  bits          per weight and activation"), std::string::npos) << r.out;
  std::ifstream sin(saved);
  const json cfg2 = json::parse(sin);
  ASSERT_EQ(cfg2["recipes"].size(), pareto.size());
  for (size_t i = 0; i < pareto.size(); ++i) EXPECT_EQ(cfg2["recipes"][i], res["points"][pareto[i].second]["recipe"]);
  EXPECT_EQ(train_config_from_json(cfg2).variants.size(), pareto.size());
}

TEST_F(AttributeCli, ReportIsByteIdenticalAtAnyThreadCount) {
  const std::string args = "attribute --experiment tiny-gpt --recipe fp8-current --unit gemm --steps 6 --deterministic --json";
  const auto one = run_split(args, "OMP_NUM_THREADS=1");
  const auto two = run_split(args + " --threads 2");
  ASSERT_EQ(one.rc, 0) << one.err;
  ASSERT_EQ(two.rc, 0) << two.err;
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(json::parse(one.out)["kind"], "attribute");
}

}  // namespace
}  // namespace precsim

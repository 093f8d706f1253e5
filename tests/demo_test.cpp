// `precsim demo`: the embedded experiment shows each classic effect above a stated threshold, so
// that a smaller or faster demo cannot quietly lose it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"

namespace precsim {
namespace {

using nlohmann::json;

json run_demo(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::string cmd = "cd " + dir.string() + " && " + PRECSIM_CLI + " demo --deterministic --threads 2 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string table;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) table.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_NE(table.find("variant"), std::string::npos);  // the summary table on stdout
  std::ifstream in(dir / "demo-report.json");           // the default output
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

TEST(Demo, ShowsTheClassicEffects) {
  // One folder per process: test runs from several checkouts at once must not share a report.
  const auto dir = std::filesystem::temp_directory_path() / ("precsim_demo_test_" + std::to_string(::getpid()));
  const json doc = run_demo(dir);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(doc["kind"], "train");
  std::map<std::string, json> s;
  for (const auto& v : doc["results"]["variants"]) s[v["name"]] = v["summary"];
  for (const char* name : {"fp32", "bf16-amp", "fp16-noscale", "fp16-amp", "bf16-pure", "bf16-pure-sr", "fp8-delayed",
                           "mxfp8", "mxfp4"})
    ASSERT_TRUE(s.count(name)) << name;
  auto num = [&](const char* v, const char* k) { return read_number(s[v][k]); };
  const double ref_loss = read_number(doc["results"]["runs"][0]["reference"]["final_loss"]);

  // FP16 without loss scaling flushes gradients that dynamic scaling keeps (measured: 2.3% vs
  // 4e-6 of non-zero gradient values).
  EXPECT_GT(num("fp16-noscale", "underflow_fraction"), 0.01);
  EXPECT_GT(num("fp16-noscale", "underflow_fraction"), 100 * num("fp16-amp", "underflow_fraction"));
  // Pure BF16 with nearest-even updates stagnates; stochastic rounding does not (measured gaps:
  // +0.020 vs +0.0001 on a reference loss of 0.013).
  EXPECT_GT(num("bf16-pure", "stagnation_fraction"), 0.3);
  EXPECT_GT(num("bf16-pure", "loss_gap"), 0.5 * ref_loss);
  EXPECT_GT(num("bf16-pure", "loss_gap"), 10 * std::fabs(num("bf16-pure-sr", "loss_gap")));
  // MXFP4 pays a visible loss gap (measured +0.0045, 35% of the reference loss), MXFP8 much less.
  EXPECT_GT(num("mxfp4", "loss_gap"), 0.15 * ref_loss);
  EXPECT_GT(num("mxfp4", "local_grad_rel_err"), 2 * num("mxfp8", "local_grad_rel_err"));
  // FP32 stays at FP32 rounding and near the chaos floor.
  EXPECT_LT(num("fp32", "local_grad_rel_err"), 1e-5);
  EXPECT_LT(num("fp32", "drift_over_chaos_floor"), 30);
  for (const auto& [name, v] : s) EXPECT_TRUE(v["diverged_at"].is_null()) << name;
}

}  // namespace
}  // namespace precsim

// `precsim gemm` end to end: the FP8 finding through the CLI, .npy operands, and bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/reports/npy.h"

namespace {

using precsim::test_support::CliRun;
CliRun run(const std::string& args, bool with_stderr = false) {
  return precsim::test_support::run_precsim(args, with_stderr);
}

CliRun run_err(const std::string& args) { return run(args, true); }

TEST(GemmCli, Fp8FastAccumulationSweep) {
  const CliRun r = run("gemm --m 8 --n 8 --sweep-k 256,4096 --a-format e4m3 --b-format e4m3 --dist uniform:low=0,high=1 "
                    "--model h100-fp8-fast,h100-fp8-promote --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "gemm");
  const auto& k4096 = j["results"]["sweep"][1];
  EXPECT_EQ(k4096["k"], 4096);
  const double fast = k4096["models"][0]["error"]["normwise_error"].get<double>();
  const double promoted = k4096["models"][1]["error"]["normwise_error"].get<double>();
  EXPECT_GT(fast, 10 * promoted);
  // The error grows with K without promotion.
  EXPECT_GT(fast, j["results"]["sweep"][0]["models"][0]["error"]["normwise_error"].get<double>());
  // Deterministic: the same run gives the same bytes.
  EXPECT_EQ(run("gemm --m 8 --n 8 --sweep-k 256,4096 --a-format e4m3 --b-format e4m3 --dist uniform:low=0,high=1 "
                "--model h100-fp8-fast,h100-fp8-promote --json --deterministic").out, r.out);
}

TEST(GemmCli, NpyOperandsAndShapeMismatch) {
  const auto dir = std::filesystem::temp_directory_path() / "precsim_gemm_cli_test";
  std::filesystem::create_directories(dir);
  std::vector<float> a(3 * 4, 1.0f), b(4 * 2, 0.5f), bad(5 * 2, 1.0f);
  precsim::write_npy((dir / "a.npy").string(), "<f4", {3, 4}, a.data(), a.size() * 4);
  precsim::write_npy((dir / "b.npy").string(), "<f4", {4, 2}, b.data(), b.size() * 4);
  precsim::write_npy((dir / "bad.npy").string(), "<f4", {5, 2}, bad.data(), bad.size() * 4);
  const CliRun ok = run("gemm --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string() +
                     " --model exact --json");
  ASSERT_EQ(ok.rc, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["config"]["m"], 3);
  EXPECT_EQ(j["results"]["sweep"][0]["models"][0]["error"]["max_ulp_error"], 0);
  const CliRun mismatch = run_err("gemm --a " + (dir / "a.npy").string() + " --b " + (dir / "bad.npy").string());
  EXPECT_EQ(mismatch.rc, 2);
  EXPECT_NE(mismatch.out.find("A's columns must equal B's rows"), std::string::npos) << mismatch.out;
  std::filesystem::remove_all(dir);
}

TEST(GemmCli, RefusesShapesThatDoNotFitAndBadModels) {
  const CliRun big = run_err("gemm --m 100000 --n 100000 --k 100000 --model a100");
  EXPECT_EQ(big.rc, 2);
  EXPECT_NE(big.out.find("GiB"), std::string::npos) << big.out;
  const CliRun unknown = run_err("gemm --m 4 --n 4 --k 4 --model a100,h900");
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.out.find("'h900'"), std::string::npos) << unknown.out;
  const CliRun missing = run_err("gemm --a /nonexistent/a.npy --b /nonexistent/b.npy");
  EXPECT_EQ(missing.rc, 2);
  const CliRun no_f16 = run_err("gemm --m 4 --n 4 --k 16 --model h100,h100-tf32 --output-format fp16");
  EXPECT_EQ(no_f16.rc, 2);
  EXPECT_NE(no_f16.out.find("'h100-tf32' has no FP16-output variant"), std::string::npos) << no_f16.out;
}

TEST(GemmCli, OutputFormatFp16UsesTheFp16OutputInstruction) {
  const CliRun r = run("gemm --m 4 --n 4 --k 64 --a-format fp16 --b-format fp16 --model h100,b200 "
                       "--output-format fp16 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["models"][0]["name"], "h100-f16acc");
  EXPECT_EQ(j["config"]["models"][1]["name"], "b200-f16acc");
  EXPECT_EQ(j["config"]["models"][1]["acc"], "fp16");
}

}  // namespace

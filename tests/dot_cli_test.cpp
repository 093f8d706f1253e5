// `precsim dot` end to end: the published guard-bit probe through the CLI, the JSON report, and
// every bad input exiting 2 with a message naming the value.
#include <gtest/gtest.h>

#include "../support/cli_run.h"

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using precsim::test_support::CliRun;
CliRun run(const std::string& args) { return precsim::test_support::run_precsim(args); }

TEST(DotCli, GuardBitProbeInJson) {
  // c = 1, two products of 2^-24: one extra alignment bit keeps them (A100), none drops them (V100).
  const std::string probe = "--a 0x1p-12,0x1p-12 --b 0x1p-12,0x1p-12 --c 1 --json";
  const CliRun a100 = run("dot --model a100 " + probe);
  ASSERT_EQ(a100.rc, 0) << a100.out;
  const auto j = nlohmann::json::parse(a100.out);
  EXPECT_EQ(j["kind"], "dot");
  EXPECT_EQ(j["results"]["result"].get<double>(), 1.0 + 0x1p-23);
  EXPECT_EQ(j["results"]["exact"].get<double>(), 1.0 + 0x1p-23);
  EXPECT_EQ(j["config"]["model"]["calibrated"], false);
  const CliRun v100 = run("dot --model v100 " + probe);
  ASSERT_EQ(v100.rc, 0) << v100.out;
  EXPECT_EQ(nlohmann::json::parse(v100.out)["results"]["result"].get<double>(), 1.0);
}

TEST(DotCli, BadInputExitsTwoNamingTheValue) {
  const CliRun len = run("dot --model a100 --a 1,2 --b 1");
  EXPECT_EQ(len.rc, 2);
  EXPECT_NE(len.out.find("--a has 2 values but --b has 1"), std::string::npos) << len.out;
  const CliRun rep = run("dot --model a100 --a 0.1 --b 1");
  EXPECT_EQ(rep.rc, 2);
  EXPECT_NE(rep.out.find("'0.1' is not a value of fp16"), std::string::npos) << rep.out;
  const CliRun c = run("dot --model a100 --a 1 --b 1 --c 0.1");
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.out.find("--c '0.1'"), std::string::npos) << c.out;
  const CliRun unknown = run("dot --model h900 --a 1 --b 1");
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.out.find("h100-fp8-promote"), std::string::npos) << unknown.out;  // lists presets
  const CliRun spec = run("dot --model block:n=x --a 1 --b 1");
  EXPECT_EQ(spec.rc, 2);
  EXPECT_NE(spec.out.find("n=x"), std::string::npos) << spec.out;
  const CliRun num = run("dot --model a100 --a abc --b 1");
  EXPECT_EQ(num.rc, 2);
  EXPECT_NE(num.out.find("abc"), std::string::npos) << num.out;
}

TEST(DotCli, Fp16OutputPicksThePresetsFp16Variant) {
  // 1 + 2^-11 is half an FP16 ulp above 1: the FP16-output V100 instruction rounds it to even (1),
  // the FP32 one keeps it.
  const std::string probe = " --a 1,0x1p-11 --b 1,1 --json";
  const CliRun f16 = run("dot --model v100 --output-format fp16" + probe);
  ASSERT_EQ(f16.rc, 0) << f16.out;
  const auto j = nlohmann::json::parse(f16.out);
  EXPECT_EQ(j["config"]["model"]["name"], "v100-f16acc");
  EXPECT_EQ(j["config"]["accumulator_format"]["name"], "fp16");
  EXPECT_EQ(j["results"]["result"].get<double>(), 1.0);
  const CliRun f32 = run("dot --model v100" + probe);
  ASSERT_EQ(f32.rc, 0) << f32.out;
  EXPECT_EQ(nlohmann::json::parse(f32.out)["results"]["result"].get<double>(), 1.0 + 0x1p-11);
  // A preset's own keys stay: F=10 drops the 2^-11 product before the rounding.
  const CliRun keyed = run("dot --model v100:F=10 --output-format fp16 --a 1,0x1.8p-11 --b 1,1 --json");
  ASSERT_EQ(keyed.rc, 0) << keyed.out;
  EXPECT_EQ(nlohmann::json::parse(keyed.out)["results"]["result"].get<double>(), 1.0);
  for (const char* none : {"a100-tf32", "b200-mxf4nvf4", "h100-fp8-promote", "block:n=8"}) {
    const CliRun r = run(std::string("dot --model ") + none + " --output-format fp16 --a 1 --b 1");
    EXPECT_EQ(r.rc, 2) << none;
    EXPECT_NE(r.out.find("has no FP16-output variant"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("presets with one: v100, t4"), std::string::npos) << r.out;
  }
}

}  // namespace

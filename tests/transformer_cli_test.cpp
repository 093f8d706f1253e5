// precsim train with a transformer: the tiny-gpt experiment writes a train report with per-layer
// attention statistics, split recipes report their split error and memory, --text trains on a
// user's file, and bad input exits 2 naming the value.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/cli_run.h"

namespace precsim {
namespace {

using nlohmann::json;
using test_support::CliTempDirTest;

class TransformerCli : public CliTempDirTest {};

TEST_F(TransformerCli, TinyGptReportHasTheReferenceVariantsAndLayerSeries) {
  const auto r = run_split("train --experiment tiny-gpt --steps 12 --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config"]["model"]["type"], "transformer");
  const json& res = j["results"];
  ASSERT_EQ(res["variants"].size(), 4u);
  const json& run = res["runs"][0];
  // The reference starts near ln(vocabulary) = ln 8 and its loss is a token mean.
  EXPECT_NEAR(run["reference"]["initial_loss"].get<double>(), 2.08, 0.2);
  for (const json& v : run["variants"]) {
    const json& layers = v["layers"];
    ASSERT_TRUE(layers.contains("l1_attn_logit_amax")) << v["name"];
    EXPECT_GT(layers["l0_attn_logit_amax"][0].get<double>(), 0.0);
    EXPECT_EQ(layers["l0_attn_logit_overflow_fraction"][0].get<double>(), 0.0);
    EXPECT_GE(layers["l0_fc_input_max_over_rms"][0].get<double>(), 1.0);  // max >= RMS always
  }
  const json& fp8 = run["variants"][3];
  EXPECT_EQ(fp8["name"], "fp8-delayed");
  EXPECT_GT(fp8["layers"]["l0_fc_input_fp8_scale"].back().get<double>(), 0.0);
  EXPECT_EQ(run["variants"][0]["layers"]["l0_fc_input_fp8_scale"].back().get<double>(), 0.0);
}

TEST_F(TransformerCli, SplitRecipesReportTheirSplitErrorAndMicroBatchMemory) {
  const auto r = run_split("train --experiment tiny-gpt --recipes fp32,accum-hf-bug,ddp8-bf16-ring --steps 4 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  const json& vs = j["results"]["variants"];
  ASSERT_EQ(vs.size(), 3u);
  EXPECT_EQ(vs[1]["split"], json({{"workers", 1}, {"micro_batches", 4}}));
  EXPECT_EQ(vs[2]["split"], json({{"workers", 8}, {"micro_batches", 1}}));
  EXPECT_EQ(vs[0]["summary"]["local_split_grad_rel_err"].get<double>(), 0.0);  // not split
  // Copy problems of 2 to 6 symbols: micro-batches count unequal tokens, so the per-micro-batch
  // mean is another gradient; the BF16 ring is off by BF16 roundings.
  EXPECT_GT(vs[1]["summary"]["local_split_grad_rel_err"].get<double>(), 0.01);
  EXPECT_GT(vs[2]["summary"]["local_split_grad_rel_err"].get<double>(), 1e-4);
  for (const json& v : vs) {
    const json& m = v["memory_bytes"];
    const int parts = v["split"]["workers"].get<int>() * v["split"]["micro_batches"].get<int>();
    EXPECT_GT(m["activations_one_batch"].get<double>(), 0.0);
    EXPECT_EQ(m["activations_one_micro_batch"].get<double>() * parts, m["activations_one_batch"].get<double>());
  }
  const auto bad = run_split("train --experiment tiny-gpt --recipes accum16-bf16-buffer --batch 12 --steps 1");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("batch 12 is not divisible by parallel.workers 1 x accumulation.micro_batches 16"),
            std::string::npos)
      << bad.err;
}

TEST_F(TransformerCli, TextFileIsLearnedCharacterByCharacter) {
  {
    std::ofstream f(path("text.txt"));
    for (int i = 0; i < 60; ++i) f << "abcabd ";
  }
  const auto r = run_split("train --experiment tiny-gpt --recipes fp32 --steps 3 --json --text '" + path("text.txt") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config"]["data"]["kind"], "text");
  // Five distinct characters: the untrained model starts near ln 5 = 1.61.
  EXPECT_NEAR(j["results"]["runs"][0]["reference"]["initial_loss"].get<double>(), 1.61, 0.2);
}

TEST_F(TransformerCli, BadInputExitsTwoNamingTheValue) {
  auto r = run_split("train --experiment tiny-gpt2 --steps 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("tiny-gpt2"), std::string::npos) << r.err;
  {
    std::ofstream f(path("bad.json"));
    f << R"({"model": {"type": "transformer", "width": 30, "heads": 4}, "data": {"kind": "copy"}, "recipes": ["fp32"]})";
  }
  r = run_split("train --config '" + path("bad.json") + "'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("model.width 30 is not a multiple of model.heads 4"), std::string::npos) << r.err;
  r = run_split("train --recipes fp32 --text '" + path("missing.txt") + "'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("needs a transformer"), std::string::npos) << r.err;
  r = run_split("train --experiment tiny-gpt --steps 1 --text '" + path("missing.txt") + "'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace precsim

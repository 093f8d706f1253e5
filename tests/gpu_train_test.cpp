// `precsim train --backend cuda` on a machine without a GPU: the no-device exit, the refusal of
// recipes a device cannot run, the recovery of FP8 operands for the device, and the whole twin
// plumbing against the stand-in GPU library (tests/support/fake_gpu_library.cpp). The stand-in answers GEMMs
// with the H100 emulation (block FMA, truncation), which the recipes' emulated variants (FP32
// sequential sums) do not use: their per-step differences must be small and non-zero, and exactly
// zero once the recipe's own accumulation model is the stand-in's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/hw/gpu_train.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_json.h"
#include "../support/cli_run.h"

namespace precsim {
namespace {

using nlohmann::json;
using test_support::CliTempDirTest;

const std::string kFake = "PRECSIM_GPU_LIBRARY=" + std::string(PRECSIM_BINARY_DIR) + "/libprecsim_gpu_fake.so";

// Per-tensor FP8 values as the recipes make them, against block_quantize's codes and scale: the
// recovered elements are the codes' values times one power of two (1 where the largest element is
// max(element), as with plain amax scaling), and the decode scale the packed one divided by it.
void expect_split_recovers(const std::string& scheme, double spread, uint64_t seed, bool same_codes) {
  const BlockScaling s = parse_block_scaling(scheme);
  std::vector<float> x(777), v(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(spread * (uniform01(seed, 1, i) - 0.5) * std::exp2(-8.0 * uniform01(seed, 2, i)));
  block_fake_quantize(s, x, v, 1, x.size());
  const BlockPacked p = block_quantize(s, x, 1, x.size());
  const Fp8Operand q = split_fp8_operand(v, s.element);
  ASSERT_EQ(q.elements.size(), v.size());
  const double ratio = q.elements[0] / decode(s.element, p.codes[0]);
  EXPECT_EQ(ratio, std::exp2(std::ilogb(ratio))) << scheme << ": not a power of two";
  if (same_codes) {
    EXPECT_EQ(ratio, 1.0) << scheme;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(q.elements[i], ratio * decode(s.element, p.codes[i])) << scheme << " element " << i;
    EXPECT_EQ(q.elements[i] * q.decode_scale, v[i]) << scheme << " element " << i;
  }
  const double dec = block_scale_value(s, p, 0) / ratio;
  EXPECT_LE(std::abs(q.decode_scale - dec), 2 * (std::nextafter(float(dec), 1e30f) - float(dec))) << scheme;
}

TEST(GpuTrain, SplitFp8OperandRecoversElementsAndDecodeScale) {
  expect_split_recovers("float8_e4m3fn:tensor", 1e-3, 1, true);
  expect_split_recovers("float8_e4m3fn:tensor", 3e4, 2, true);
  expect_split_recovers("float8_e5m2:tensor", 1e-6, 3, true);
  // Power-of-two scales and a margin leave the largest element below max(element).
  expect_split_recovers("float8_e4m3fn:tensor:pow2", 7.0, 4, false);
  expect_split_recovers("float8_e5m2:tensor:margin=2", 0.2, 5, false);
}

TEST(GpuTrain, SplitFp8OperandRefusesValuesNoScaleExplains) {
  const Format e4m3 = format_by_name("e4m3");
  const std::vector<float> zeros = {0.0f, -0.0f};
  const Fp8Operand z = split_fp8_operand(zeros, e4m3);
  EXPECT_EQ(z.decode_scale, 1.0f);
  EXPECT_TRUE(std::signbit(z.elements[1]));
  // Two values 2^-20 apart are no two E4M3 values under one scale.
  const std::vector<float> bad = {1.0f, 1.0f + std::ldexp(1.0f, -20)};
  EXPECT_THROW(split_fp8_operand(bad, e4m3), std::invalid_argument);
}

PrecsimGpuDevice device(int major, int minor) {
  PrecsimGpuDevice d{};
  d.major = major;
  d.minor = minor;
  std::snprintf(d.name, sizeof d.name, "test device");
  return d;
}

std::string refusal(const Recipe& r, const PrecsimGpuDevice& d) {
  try {
    check_cuda_recipe(r, d);
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kUnsupported);
    return e.what();
  }
  return "";
}

TEST(GpuTrain, RecipesTheDeviceCannotRunAreRefusedWithTheReason) {
  const PrecsimGpuDevice a100 = device(8, 0), h100 = device(9, 0);
  EXPECT_EQ(refusal(recipe_preset("bf16-amp"), a100), "");
  EXPECT_EQ(refusal(recipe_preset("fp16-amp"), a100), "");
  EXPECT_EQ(refusal(recipe_preset("fp32"), device(7, 0)), "");
  EXPECT_EQ(refusal(recipe_preset("fp8-current"), h100), "");
  EXPECT_EQ(refusal(recipe_preset("fp8-delayed"), h100), "");
  EXPECT_NE(refusal(recipe_preset("bf16-amp"), device(7, 5)).find("needs compute capability 8.0"), std::string::npos);
  const std::string fp8 = refusal(recipe_preset("fp8-current"), a100);
  EXPECT_NE(fp8.find("gemm.forward.a (float8_e4m3fn, scaling tensor-current) needs compute capability 8.9"),
            std::string::npos) << fp8;
  EXPECT_NE(fp8.find("compute capability 8.0"), std::string::npos) << fp8;
  const std::string mx = refusal(recipe_preset("mxfp8"), h100);
  EXPECT_NE(mx.find("recipe 'mxfp8': gemm.forward.a (float8_e4m3fn, scaling mx)"), std::string::npos) << mx;
  EXPECT_NE(refusal(recipe_preset("nvfp4"), h100).find("scaling nvfp4"), std::string::npos);
  EXPECT_NE(refusal(recipe_preset("fp8-blockwise"), h100).find("scaling rowwise"), std::string::npos);
  const Recipe e5 = recipe_from_json(json::parse(R"({"preset": "fp8-current", "gemm": {"forward":
      {"a": {"format": "e5m2"}, "b": {"format": "e5m2"}}}})"), "e5");
  EXPECT_NE(refusal(e5, h100).find("no e5m2 x e5m2"), std::string::npos) << refusal(e5, h100);
  const Recipe mixed = recipe_from_json(json::parse(R"({"preset": "bf16-amp", "gemm": {"dgrad":
      {"b": {"format": "fp16"}}}})"), "mixed");
  EXPECT_NE(refusal(mixed, h100).find("gemm.dgrad (bf16 x fp16): cuBLASLt needs both operands of one type"),
            std::string::npos) << refusal(mixed, h100);
}

class GpuTrainCli : public CliTempDirTest {
 protected:
  // An MLP with one hidden layer: two linear layers, so per step two forward, one dgrad and two
  // wgrad products.
  std::string config(const std::string& recipes, int steps) const {
    const std::string p = path("train.json");
    std::ofstream(p) << R"({"steps": )" << steps << R"(, "batch": 32, "shadow_every": 0,
      "data": {"kind": "gaussian-mixture", "features": 24, "classes": 4, "train_size": 256, "heldout_size": 64},
      "model": {"hidden": [40]}, "optimizer": {"kind": "adamw", "lr": 0.01}, "recipes": )"
                     << recipes << "}";
    return p;
  }
  json run_fake(const std::string& cfg, int* rc, std::string* err, std::string* stdout_text = nullptr) const {
    const std::string out = path("report.json");
    const auto r = run_split("train --backend cuda --config " + cfg + " --out " + out, kFake);
    *rc = r.rc;
    *err = r.err;
    if (stdout_text) *stdout_text = r.out;
    std::ifstream f(out);
    return f ? json::parse(f) : json();
  }
};

TEST_F(GpuTrainCli, WithoutADeviceExits3AndWritesNothing) {
  const auto r = run_split("train --backend cuda --config " + config(R"(["bf16-amp"])", 2) + " --out " + path("r.json"));
  if (r.rc == 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.err.find("no usable GPU"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("r.json")));
}

TEST_F(GpuTrainCli, ReportsEachVariantBesideItsCudaTwinStepByStep) {
  int rc = 0;
  std::string err;
  std::string table;
  const json rep = run_fake(config(R"(["bf16-amp", "fp16-amp", "fp8-current"])", 5), &rc, &err, &table);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(table.find("cuda twin"), std::string::npos) << table;
  const json& be = rep["results"]["backend"];
  EXPECT_EQ(be["name"], "cuda");
  EXPECT_EQ(be["device"], 0);
  EXPECT_EQ(be["system"]["devices"][0]["compute_capability"], "9.0");
  EXPECT_EQ(be["fp8_fast_accum"]["forward"], true);
  EXPECT_EQ(be["fp8_fast_accum"]["wgrad"], false);
  const json& vars = rep["results"]["runs"][0]["variants"];
  ASSERT_EQ(vars.size(), 3u);
  for (const json& v : vars) {
    const json& t = v["backend"];
    const std::string name = v["name"];
    ASSERT_TRUE(t.is_object()) << name;
    EXPECT_EQ(t["name"], "cuda");
    EXPECT_EQ(t["series"]["step"], json({0, 1, 2, 3, 4})) << name;
    EXPECT_EQ(t["calls"]["forward"]["gemm_calls"], 10) << name;
    EXPECT_EQ(t["calls"]["dgrad"]["gemm_calls"], 5) << name;
    EXPECT_EQ(t["calls"]["wgrad"]["gemm_calls"], 10) << name;
    EXPECT_EQ(t["calls"]["forward"]["algorithms"][0]["algo_id"], 66) << name;
    double max_diff = 0, max_err = 0;
    for (int s = 0; s < 5; ++s) {
      const double loss = v["series"]["loss"][s], twin = t["series"]["loss"][s], diff = t["series"]["loss_diff"][s];
      EXPECT_EQ(diff, twin - loss) << name << " step " << s;
      // Same weights at step 0: only the forward products differ, by the accumulation models.
      EXPECT_LT(std::abs(diff), (s == 0 ? 1e-3 : 2e-2) * loss) << name << " step " << s;
      max_diff = std::max(max_diff, std::abs(diff));
      max_err = std::max(max_err, t["series"]["weight_rel_err"][s].get<double>());
    }
    // BF16 rounds every product's output to 8 bits, which hides FP32-level differences in 5 steps;
    // FP16's 11 bits and FP8's own scaling path (element codes, scales in the epilogue) show them.
    if (name != "bf16-amp") {
      EXPECT_GT(max_err, 0.0) << name << ": block FMA against FP32 sums must differ";
    }
    EXPECT_LT(max_err, 5e-2) << name;
    EXPECT_EQ(t["summary"]["max_abs_loss_diff"], max_diff) << name;
    EXPECT_EQ(t["summary"]["max_weight_rel_err"], max_err) << name;
    EXPECT_EQ(t["summary"]["final_weight_rel_err"], t["series"]["weight_rel_err"][4]) << name;
    EXPECT_TRUE(t["summary"]["diverged_at"].is_null()) << name;
  }
}

TEST_F(GpuTrainCli, TwinMatchesBitForBitWhenTheRecipeSumsAsTheDevice) {
  // The stand-in's BF16/FP16 products are the h100 model with FP32 output: with that model in the
  // recipe, every operand, layout and transposition must reach the device exactly.
  int rc = 0;
  std::string err;
  const std::string h100 = R"({"forward": {"accum": "h100"}, "dgrad": {"accum": "h100"}, "wgrad": {"accum": "h100"}})";
  const json rep = run_fake(config(R"([{"name": "bf16-h100", "preset": "bf16-amp", "gemm": )" + h100 +
                                       R"(}, {"name": "fp16-h100", "preset": "fp16-amp", "gemm": )" + h100 + "}]",
                                   4),
                            &rc, &err);
  ASSERT_EQ(rc, 0) << err;
  for (const json& v : rep["results"]["runs"][0]["variants"]) {
    const json& t = v["backend"];
    EXPECT_EQ(t["series"]["loss"], v["series"]["loss"]) << v["name"];
    EXPECT_EQ(t["summary"]["max_abs_loss_diff"], 0.0) << v["name"];
    EXPECT_EQ(t["summary"]["max_weight_rel_err"], 0.0) << v["name"];
  }
}

TEST_F(GpuTrainCli, UnsupportedRecipeOrModelIsRefusedBeforeAnyStep) {
  const auto mx = run_split("train --backend cuda --config " + config(R"(["bf16-amp", "mxfp8"])", 2) + " --out " +
                                path("r.json"),
                            kFake);
  EXPECT_EQ(mx.rc, 2) << mx.err;
  EXPECT_NE(mx.err.find("recipe 'mxfp8': gemm.forward.a (float8_e4m3fn, scaling mx)"), std::string::npos) << mx.err;
  EXPECT_NE(mx.err.find("compute capability 9.0"), std::string::npos) << mx.err;
  EXPECT_FALSE(std::filesystem::exists(path("r.json")));
  const auto gpt = run_split("train --backend cuda --experiment tiny-gpt --steps 1", kFake);
  EXPECT_EQ(gpt.rc, 2) << gpt.err;
  EXPECT_NE(gpt.err.find("runs the MLP only"), std::string::npos) << gpt.err;
  const auto bad = run_split("train --backend tpu --recipes fp32");
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("tpu"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace precsim

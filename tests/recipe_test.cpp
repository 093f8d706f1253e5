// Recipe presets, overrides and strict validation.
#include <gtest/gtest.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

std::string error_of(const nlohmann::json& j, const char* name = "fp32") {
  try {
    recipe_from_json(j, name);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Recipe, EveryPresetResolvesAndRoundTrips) {
  for (const auto& n : recipe_preset_names()) {
    const Recipe r = recipe_preset(n);
    const nlohmann::json j = recipe_to_json(r);
    const Recipe back = recipe_from_json(j, n);
    EXPECT_EQ(recipe_to_json(back), j) << n;
    for (const GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad})
      for (const OperandSpec* o : {&g->a, &g->b}) EXPECT_NO_THROW(parse_block_scaling(operand_scheme(*o, 0))) << n;
  }
}

// operand_scaling builds the scheme from the operand's typed fields; parsing the text it names must
// give the same scheme, field for field, for every preset's operands and for the switches and
// element spellings a recipe can set (a wrong block, rule, margin or 2-D layout fails here).
TEST(Recipe, TypedOperandSchemeEqualsTheParsedText) {
  int checked = 0;
  auto expect_same = [&](const OperandSpec& o, int margin, const std::string& what) {
    const BlockScaling typed = operand_scaling(o, margin);
    EXPECT_EQ(typed, parse_block_scaling(typed.name)) << what << " " << typed.name;
    ++checked;
  };
  for (const auto& n : recipe_preset_names()) {
    const Recipe r = recipe_preset(n);
    for (const GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad})
      for (const OperandSpec* o : {&g->a, &g->b})
        for (int margin : {0, 3}) expect_same(*o, margin, n);
  }
  for (const char* f : {"e4m3", "e5m2", "e4m3:nanonly", "e2m3", "e3m2", "e2m1", "int8"})
    for (int block : {16, 32, 64})
      for (ScaleRule rule : {ScaleRule::kFloor, ScaleRule::kCeil, ScaleRule::kEven, ScaleRule::kRceil})
        for (bool two_d : {false, true}) {
          OperandSpec o{{f, Rounding::kNearestEven, format_by_name(f)}, Scaling::kMx, block};
          o.mx_rule = rule;
          o.two_d = two_d;
          expect_same(o, 0, f);
        }
  for (bool two_d : {false, true})
    for (bool four_six : {false, true}) {
      OperandSpec o{{"e2m1", Rounding::kStochastic, format_by_name("e2m1")}, Scaling::kNvfp4, 16};
      o.two_d = two_d;
      o.four_over_six = four_six;
      expect_same(o, 0, "nvfp4");
    }
  for (const char* f : {"e4m3", "e5m2", "bf16", "fp16", "e3m2"})
    for (Scaling s : {Scaling::kTensorCurrent, Scaling::kTensorDelayed, Scaling::kRowwise, Scaling::kBlock2d})
      for (int block : {64, 128})
        for (int margin : {0, 2, 64}) expect_same({{f, Rounding::kNearestEven, format_by_name(f)}, s, block}, margin, f);
  EXPECT_EQ(checked, 26 * 6 * 2 + 7 * 3 * 4 * 2 + 4 + 5 * 4 * 2 * 3);
  // What the parser refuses, the typed path refuses too, naming the value.
  auto error = [](const OperandSpec& o, int margin) {
    try {
      (void)operand_scaling(o, margin);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const TensorFormat fp32{"fp32", Rounding::kNearestEven, format_by_name("fp32")};
  const TensorFormat fp16{"fp16", Rounding::kNearestEven, format_by_name("fp16")};
  EXPECT_NE(error({fp32, Scaling::kTensorCurrent}, 0).find("fp32 has FP32's range"), std::string::npos);
  EXPECT_NE(error({fp16, Scaling::kTensorCurrent}, 65).find("margin 65 is out of range; allowed: 0..64"), std::string::npos);
  EXPECT_NE(error({fp16, Scaling::kMx, 32}, 0).find("needs an MX element format"), std::string::npos);
  EXPECT_NE(error({fp16, Scaling::kNvfp4, 16}, 0).find("needs element format e2m1, got 'fp16'"), std::string::npos);
  EXPECT_NE(error({fp16, Scaling::kRowwise, 0}, 0).find("block length 0 is out of range"), std::string::npos);
  // Read from a config, the refusal names the recipe and the operand.
  EXPECT_EQ(error_of({{"preset", "fp32"}, {"gemm", {{"dgrad", {{"b", {{"scaling", "tensor-current"}}}}}}}}, "mine"),
            "recipe 'mine': gemm.dgrad.b: element format fp32 has FP32's range; scaling it is not supported");
}

TEST(Recipe, PresetTableNamesEveryPresetOnceWithItsDoc) {
  const auto presets = recipe_presets();
  ASSERT_EQ(presets.size(), recipe_preset_names().size());
  const std::string doc = recipe_presets_doc();
  for (size_t i = 0; i < presets.size(); ++i) {
    EXPECT_EQ(presets[i].name, recipe_preset_names()[i]);
    EXPECT_FALSE(presets[i].doc.empty()) << presets[i].name;
    EXPECT_EQ(recipe_preset(presets[i].name).preset, presets[i].name);
    EXPECT_NE(doc.find("  " + std::string(presets[i].name) + " "), std::string::npos) << presets[i].name;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(presets[i].name, presets[j].name);
  }
  EXPECT_EQ(std::count(doc.begin(), doc.end(), '\n'), long(presets.size()));
}

TEST(Recipe, PresetsSayWhatTheirNamesSay) {
  EXPECT_EQ(recipe_preset("fp16-amp").loss_scaling.mode, LossScaleMode::kDynamic);
  EXPECT_EQ(recipe_preset("fp16-noscale").loss_scaling.mode, LossScaleMode::kNone);
  EXPECT_EQ(recipe_preset("fp16-amp").activation_grads.format.name, "fp16");
  EXPECT_FALSE(recipe_preset("bf16-pure").has_master());
  EXPECT_EQ(recipe_preset("bf16-pure-sr").update_rounding, UpdateRounding::kStochastic);
  EXPECT_EQ(recipe_preset("bf16-pure-kahan").update_rounding, UpdateRounding::kKahan);
  const Recipe d = recipe_preset("fp8-delayed");  // HYBRID: E4M3 forward, E5M2 gradients
  EXPECT_EQ(d.forward.a.fmt.format.name, "float8_e4m3fn");
  EXPECT_EQ(d.dgrad.a.fmt.format.name, "float8_e5m2");
  EXPECT_EQ(d.wgrad.a.fmt.format.name, "float8_e5m2");
  EXPECT_EQ(d.forward.a.scaling, Scaling::kTensorDelayed);
  EXPECT_EQ(recipe_preset("mxfp4").forward.b.scaling, Scaling::kMx);
  EXPECT_EQ(recipe_preset("nvfp4").wgrad.a.fmt.rounding, Rounding::kStochastic);
  EXPECT_EQ(recipe_preset("fp8-blockwise").forward.b.scaling, Scaling::kBlock2d);
  EXPECT_EQ(recipe_preset("fp8-blockwise").forward.a.scaling, Scaling::kRowwise);
}

TEST(Recipe, OverridesChangeOnlyTheGivenFields) {
  const Recipe r = recipe_from_json({{"preset", "bf16-amp"}, {"weights", {{"format", "fp16"}}},
                                     {"loss_scaling", {{"mode", "dynamic"}, {"growth_interval", 100}}}},
                                    "mine");
  EXPECT_EQ(r.name, "mine");
  EXPECT_EQ(r.preset, "bf16-amp");
  EXPECT_EQ(r.weights.format.name, "fp16");
  EXPECT_EQ(r.activations.format.name, "bf16");
  EXPECT_EQ(r.loss_scaling.mode, LossScaleMode::kDynamic);
  EXPECT_EQ(r.loss_scaling.growth_interval, 100);
  EXPECT_EQ(r.loss_scaling.init_scale, 65536.0);
}

TEST(Recipe, BadInputNamesTheKeyAndTheAllowedValues) {
  EXPECT_NE(error_of({{"wieghts", {{"format", "bf16"}}}}).find("unknown recipe key 'wieghts'; valid keys here:"),
            std::string::npos);
  EXPECT_NE(error_of({{"weights", {{"fromat", "bf16"}}}}).find("'weights.fromat'"), std::string::npos);
  EXPECT_NE(error_of({{"weights", "bf16"}}).find("expected object"), std::string::npos);
  EXPECT_NE(error_of({{"weights", {{"format", "bf17"}}}}).find("bf17"), std::string::npos);
  EXPECT_NE(error_of({{"update_rounding", "up"}}).find("allowed: nearest-even, stochastic, kahan"), std::string::npos);
  EXPECT_NE(error_of({{"loss_scaling", {{"growth_interval", 2.5}}}}).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of({{"loss_scaling", {{"backoff_factor", 2.0}}}}).find("backoff_factor"), std::string::npos);
  EXPECT_NE(error_of({{"preset", "fp7"}}).find("known recipes: fp32, bf16-amp"), std::string::npos);
  EXPECT_NE(error_of({{"gemm", {{"forward", {{"a", {{"scaling", "mx"}, {"block", 0}}}}}}}}).find("block 0"),
            std::string::npos);
}

// An FP32 operand takes a copy when every value is zero or normal (OperandQuantizer's shortcut); a
// subnormal, Inf or NaN anywhere sends the whole array through quantize(). Either way the bits and
// the counts are quantize()'s, in every rounding mode.
TEST(Recipe, Fp32OperandIsQuantizeBitForBit) {
  std::vector<float> base;
  for (int i = 0; i < 203; ++i) base.push_back(std::ldexp(float(i % 17) - 8.5f, i % 60 - 30));
  base[5] = 0.0f;
  base[9] = -0.0f;
  base[11] = std::numeric_limits<float>::min();  // smallest normal: still the copy
  const float odd[] = {std::numeric_limits<float>::denorm_min(), -1e-40f, std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (const Rounding mode : {Rounding::kNearestEven, Rounding::kStochastic, Rounding::kTowardZero}) {
    OperandSpec spec;
    spec.fmt.rounding = mode;
    spec.fmt.format = format_by_name("fp32");
    const OperandQuantizer q(spec, 16, 0);
    const SrKey key{7, 3, 1, 2};
    for (int variant = -1; variant < int(std::size(odd)); ++variant) {
      std::vector<float> in = base;
      if (variant >= 0) in[100 + variant * 20] = odd[variant];
      std::vector<float> got(in.size(), 1.0f), want(in.size(), 2.0f);
      QuantStats got_st, want_st;
      q.apply(in, got, 1, in.size(), 1, key, &got_st, nullptr);
      QuantOptions o;
      o.rounding = mode;
      o.sr_key = key;
      quantize(spec.fmt.format, std::span<const float>(in), std::span<float>(want), o, &want_st);
      for (size_t i = 0; i < in.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "variant " << variant << " at " << i;
      EXPECT_EQ(got_st, want_st) << "variant " << variant;
      EXPECT_EQ(got_st.count, in.size());
      EXPECT_EQ(got_st.subnormal, variant == 0 || variant == 1 ? 1u : 0u) << "variant " << variant;
      EXPECT_EQ(got_st.nan, variant == 4 ? 1u : 0u) << "variant " << variant;
    }
  }
}

}  // namespace
}  // namespace precsim

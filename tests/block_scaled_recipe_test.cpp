// Recipes on Blackwell's block-scaled instructions (b200-mxf8f6f4, b200-mxf4nvf4, b200-mxf4): a
// recipe's GEMM hands the instruction its operands' element codes and block scales, so its product
// is gemm() on the same quantized operands bit for bit; what the instruction cannot take is
// refused when the GEMM is made, and a training run works.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/hadamard.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

// One operand as the test derives it from block_quantize's packed form on its own: element values
// through unpack_nibbles / decode_array in the array's layout, the packed scales as they are
// (block_mn = the blocks' rows, 16 for 2-D weights).
struct Expected {
  Format element;
  std::vector<float> values, scales;
  BlockScales view;
  std::vector<float> dequantized;  // element x scale x tensor scale, as fake quantization gives
};

Expected expected_operand(const OperandSpec& spec, const float* in, size_t rows, size_t cols, int axis, const SrKey& key) {
  BlockScaling s = parse_block_scaling(operand_scheme(spec, 0));
  s.axis = axis;
  s.element_options.rounding = spec.fmt.rounding;
  s.element_options.sr_key = key;
  const BlockPacked p = block_quantize(s, std::span<const float>(in, rows * cols), rows, cols);
  Expected e;
  e.element = s.element;
  const size_t srows = axis == 1 ? rows : cols, scols = axis == 1 ? cols : rows;
  std::vector<uint8_t> codes(scols);
  std::vector<float> stored(scols);
  e.values.resize(rows * cols);
  for (size_t r = 0; r < srows; ++r) {
    const std::span<const uint8_t> row(p.codes.data() + r * p.code_row_bytes, p.code_row_bytes);
    if (s.element.bits() <= 4) unpack_nibbles(row, codes);
    else std::memcpy(codes.data(), row.data(), scols);
    decode_array(s.element, codes.data(), stored);
    for (size_t c = 0; c < scols; ++c) e.values[axis == 1 ? r * cols + c : c * cols + r] = stored[c];
  }
  for (size_t i = 0; i < p.scales.size(); ++i)
    e.scales.push_back(float(s.scale_format == ScaleFormat::kE4M3 ? decode(format_by_name("e4m3"), p.scales[i])
                                                                   : std::ldexp(1.0, int{p.scales[i]} - 127)));
  e.view = BlockScales{e.scales.data(), s.block_along, s.block_across, int64_t(p.scale_cols), p.tensor_scale};
  e.dequantized.resize(rows * cols);
  for (size_t i = 0; i < rows * cols; ++i) {
    const size_t r = i / cols, c = i % cols, op_row = axis == 1 ? r : c, k = axis == 1 ? c : r;
    const double sc = e.scales[(op_row / size_t(s.block_across)) * p.scale_cols + k / size_t(s.block_along)];
    e.dequantized[i] = float(double(e.values[i]) * (sc * double(p.tensor_scale)));
  }
  return e;
}

bool same_bits(std::span<const float> x, std::span<const float> y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The three products of a layer (tokens 64, in 48, out 32) under `spec_of(pass)` with `accum`: the
// recipe GEMM against gemm() on expected_operand()'s codes and scales.
void expect_gemm_on_codes(const Recipe& r, const std::string& accum) {
  const int rows = 64, in = 48, out = 32;
  std::vector<float> x(size_t(rows) * in), w(size_t(out) * in), dy(size_t(rows) * out);
  fill_normal(x, 7, 1);
  fill_normal(w, 7, 2, 0, 0.2);
  fill_normal(dy, 7, 3, 0, 1e-3);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 30;
  struct Call {
    GemmSpec spec;
    int m, n, k;
    bool ta, tb;
    const float *a, *b;
  } calls[3] = {{r.forward, rows, out, in, false, true, x.data(), w.data()},
                {r.dgrad, rows, in, out, false, false, dy.data(), w.data()},
                {r.wgrad, out, in, rows, true, false, dy.data(), x.data()}};
  for (int i = 0; i < 3; ++i) {
    Call& cl = calls[i];
    cl.spec.accum = accum_spec(accum);
    SCOPED_TRACE(accum + " pass " + std::to_string(i));
    RecipeGemm g(static_cast<GemmPass>(i), cl.spec, 16, 0);
    GemmArgs args;
    args.m = cl.m, args.n = cl.n, args.k = cl.k, args.trans_a = cl.ta, args.trans_b = cl.tb;
    std::vector<float> c(size_t(cl.m) * cl.n), want(c.size());
    OperandKeys keys;
    keys.a = SrKey{11, 4, 2 * uint32_t(i), 5};
    keys.b = SrKey{11, 4, 2 * uint32_t(i) + 1, 5};
    g.run(args, 1, cl.a, cl.b, c.data(), keys, nullptr, nullptr);
    // The operands, transformed first where the recipe sets rht (wgrad).
    const size_t ar = cl.ta ? cl.k : cl.m, ac = cl.ta ? cl.m : cl.k, br = cl.tb ? cl.n : cl.k, bc = cl.tb ? cl.k : cl.n;
    std::vector<float> ta(cl.a, cl.a + ar * ac), tb(cl.b, cl.b + br * bc);
    if (cl.spec.hadamard) {
      const auto signs = hadamard_signs(cl.spec.hadamard, keys.a.seed);
      random_hadamard_transform(std::vector<float>(ta), ta, ar, ac, cl.ta ? 0 : 1, signs);
      random_hadamard_transform(std::vector<float>(tb), tb, br, bc, cl.tb ? 1 : 0, signs);
    }
    const Expected ea = expected_operand(cl.spec.a, ta.data(), ar, ac, cl.ta ? 0 : 1, keys.a);
    const Expected eb = expected_operand(cl.spec.b, tb.data(), br, bc, cl.tb ? 1 : 0, keys.b);
    // The codes and scales are the quantization the role statistics count (fake quantization).
    EXPECT_TRUE(same_bits(ea.dequantized, g.quantized_a()));
    EXPECT_TRUE(same_bits(eb.dequantized, g.quantized_b()));
    GemmArgs ref = args;
    ref.a_format = ea.element, ref.b_format = eb.element;
    ref.a_scales = ea.view, ref.b_scales = eb.view;
    ref.input_policy = InputPolicy::kCheck;
    gemm(parse_accum_model(accum), ref, ea.values.data(), eb.values.data(), want.data());
    EXPECT_TRUE(same_bits(c, want));
    // NVFP4's scales inside the instruction are not the FP32 product of the dequantized operands
    // (MX products under power-of-two scales of these operands often sum exactly in both).
    if (accum != "b200-mxf4nvf4") continue;
    std::vector<float> deq(c.size());
    GemmArgs plain = args;
    plain.input_policy = InputPolicy::kTrust;
    gemm(parse_accum_model("fp32-seq"), plain, g.quantized_a().data(), g.quantized_b().data(), deq.data());
    EXPECT_FALSE(same_bits(c, deq));
  }
}

TEST(BlockScaledRecipe, Mxf4nvf4OnThePublishedNvfp4IsGemmOnItsCodesAndScales) {
  // 1x16 activations and gradients, 16x16 weights, RHT on wgrad, SR on gradients.
  expect_gemm_on_codes(recipe_preset("nvfp4"), "b200-mxf4nvf4");
  Recipe four = recipe_from_json({{"preset", "nvfp4"}, {"four_over_six", true}}, "r");
  expect_gemm_on_codes(four, "b200-mxf4nvf4");
}

TEST(BlockScaledRecipe, MxRecipesOnMxf8f6f4AndMxf4AreGemmOnTheirCodesAndScales) {
  expect_gemm_on_codes(recipe_preset("mxfp8"), "b200-mxf8f6f4");   // rceil, E4M3
  expect_gemm_on_codes(recipe_preset("mxfp6"), "b200-mxf8f6f4");   // E2M3 / E3M2
  expect_gemm_on_codes(recipe_from_json({{"preset", "mxfp4"}, {"weights_2d", true}}, "r"), "b200-mxf4");
}

std::string refusal(const json& recipe) {
  try {
    train_config_from_json({{"batch", 64}, {"recipes", {recipe}}});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

json on(const char* preset, const char* accum) {
  const json g = {{"accum", accum}};
  return {{"name", "x"}, {"preset", preset}, {"gemm", {{"forward", g}, {"dgrad", g}, {"wgrad", g}}}};
}

TEST(BlockScaledRecipe, RefusesOperandsTheInstructionCannotTake) {
  EXPECT_EQ(refusal(on("nvfp4", "b200-mxf4nvf4")), "");
  EXPECT_EQ(refusal(on("mxfp8", "b200-mxf8f6f4")), "");
  EXPECT_EQ(refusal(on("mxfp4", "b200-mxf4")), "");
  EXPECT_NE(refusal(on("mxfp8", "b200-mxf4nvf4")).find("'b200-mxf4nvf4' takes UE4M3 scales; a mx operand has E8M0"),
            std::string::npos) << refusal(on("mxfp8", "b200-mxf4nvf4"));
  EXPECT_NE(refusal(on("nvfp4", "b200-mxf8f6f4")).find("'b200-mxf8f6f4' takes UE8M0 scales; a nvfp4 operand has E4M3"),
            std::string::npos);
  EXPECT_NE(refusal(on("mxfp8", "b200-mxf4")).find("operand format 'float8_e4m3fn'"), std::string::npos)
      << refusal(on("mxfp8", "b200-mxf4"));
  json b16 = on("mxfp8", "b200-mxf8f6f4");
  b16["gemm"]["forward"]["a"] = {{"block", 16}};
  EXPECT_NE(refusal(b16).find("gemm.forward.a (mxfp8_e4m3:block=16:rule=rceil, blocks of 16): gemm: model b200-mxf8f6f4 "
                              "takes scale blocks of 32 k, not 16"),
            std::string::npos) << refusal(b16);
  EXPECT_NE(refusal(on("bf16-amp", "b200-mxf8f6f4")).find("takes block-scaled operands (scaling mx or nvfp4); this operand "
                                                          "has scaling none"),
            std::string::npos);
}

TEST(BlockScaledRecipe, TrainsOnTheInstructions) {
  json cfg = {{"steps", 6}, {"batch", 32}, {"seeds", 1}, {"shadow_every", 0},
              {"recipes", {"nvfp4", on("nvfp4", "b200-mxf4nvf4"), "mxfp8", on("mxfp8", "b200-mxf8f6f4")}}};
  cfg["recipes"][1]["name"] = "nvfp4-mxf4nvf4";
  cfg["recipes"][3]["name"] = "mxfp8-mxf8f6f4";
  const json res = run_training(train_config_from_json(cfg));
  const json& v = res.at("runs").at(0).at("variants");
  ASSERT_EQ(v.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(v[i]["summary"]["final_loss"].get<double>())) << i;
  EXPECT_NE(v[0]["summary"]["final_loss"], v[1]["summary"]["final_loss"]);
}

}  // namespace
}  // namespace precsim

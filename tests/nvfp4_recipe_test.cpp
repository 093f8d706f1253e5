// The NVFP4 recipe's switches (rht, weights_2d, sr_gradients, four_over_six) and the MX scale rule:
// presets, refusals, and that each switch changes exactly the operands it names.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/hadamard.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  try {
    recipe_from_json(j, "r");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(Nvfp4Recipe, PresetsHoldThePublishedRecipeAndTodays) {
  const Recipe full = recipe_preset("nvfp4"), plain = recipe_preset("nvfp4-plain");
  EXPECT_TRUE(full.block.rht && full.block.weights_2d && full.block.sr_gradients && !full.block.four_over_six);
  EXPECT_EQ(full.wgrad.hadamard, 16);
  EXPECT_EQ(full.forward.hadamard + full.dgrad.hadamard, 0);
  EXPECT_TRUE(full.forward.b.two_d && full.dgrad.b.two_d);
  EXPECT_FALSE(full.forward.a.two_d || full.dgrad.a.two_d || full.wgrad.a.two_d || full.wgrad.b.two_d);
  EXPECT_EQ(full.forward.a.fmt.rounding, Rounding::kNearestEven);
  EXPECT_EQ(full.forward.b.fmt.rounding, Rounding::kNearestEven);
  EXPECT_EQ(full.dgrad.a.fmt.rounding, Rounding::kStochastic);
  EXPECT_EQ(full.wgrad.a.fmt.rounding, Rounding::kStochastic);
  EXPECT_EQ(full.wgrad.b.fmt.rounding, Rounding::kNearestEven);
  EXPECT_EQ(operand_scheme(full.forward.b, 0), "nvfp4:2d");
  EXPECT_EQ(operand_scheme(full.forward.a, 0), "nvfp4");
  // nvfp4-plain: 1x16 blocks everywhere, SR on gradients, no transform (the old nvfp4).
  EXPECT_FALSE(plain.block.rht || plain.block.weights_2d);
  EXPECT_TRUE(plain.block.sr_gradients);
  EXPECT_EQ(plain.wgrad.hadamard, 0);
  EXPECT_EQ(operand_scheme(plain.forward.b, 0), "nvfp4");
  // MXFP8 follows Transformer Engine (rceil), mxfp8-ocp keeps OCP's floor.
  EXPECT_EQ(operand_scheme(recipe_preset("mxfp8").forward.a, 0), "mxfp8_e4m3:rule=rceil");
  EXPECT_EQ(operand_scheme(recipe_preset("mxfp8-ocp").forward.a, 0), "mxfp8_e4m3");
  EXPECT_EQ(parse_block_scaling(operand_scheme(recipe_preset("mxfp8").dgrad.a, 0)).rule, ScaleRule::kRceil);
  EXPECT_EQ(recipe_preset("mxfp8").dgrad.a.fmt.format.name, "float8_e4m3fn");  // E4M3 in both passes
  EXPECT_EQ(operand_scheme(recipe_from_json({{"preset", "mxfp8"}, {"weights_2d", true}}, "m").forward.b, 0),
            "mxfp8_e4m3:rule=rceil:2d");
}

TEST(Nvfp4Recipe, ThePublishedRecipeKeepsItsLastLayersInBf16) {
  const Recipe full = recipe_preset("nvfp4");
  EXPECT_EQ(full.keep_bf16.fraction, 0.16);
  EXPECT_FALSE(recipe_preset("nvfp4-plain").keep_bf16.any());
  // tiny-gpt's 2 blocks: block 1 (its norm, attention and MLP slots) takes bf16-amp's operands
  // with no NVFP4 switch left on them; block 0 keeps the whole recipe.
  const PartRecipes tf(full, true, 2);
  for (int slot = 0; slot < tf.slots(); ++slot) {
    const Recipe& r = tf.at(slot);
    const bool bf16 = tf.slot_name(slot).starts_with("blocks.1");
    SCOPED_TRACE(tf.slot_name(slot));
    EXPECT_EQ(r.forward.b.fmt.name, bf16 ? "bf16" : "e2m1");
    EXPECT_EQ(r.wgrad.hadamard, bf16 ? 0 : 16);
    EXPECT_EQ(r.dgrad.a.fmt.rounding, bf16 ? Rounding::kNearestEven : Rounding::kStochastic);
    EXPECT_EQ(r.forward.b.two_d, !bf16);
  }
  // A 62-block model keeps the last ceil(0.16 x 62) = 10, the paper's count (it keeps 2 of them first).
  EXPECT_EQ(keep_bf16_selection(full.keep_bf16, 62), (std::vector<int>{52, 53, 54, 55, 56, 57, 58, 59, 60, 61}));
  EXPECT_EQ(keep_bf16_selection(full.keep_bf16, 3), std::vector<int>{2});
  // 0 keeps none, and survives the recipe's JSON (a preset that keeps layers would keep them again).
  const Recipe none = recipe_from_json({{"preset", "nvfp4"}, {"keep_bf16_layers", 0}}, "n");
  EXPECT_FALSE(none.keep_bf16.any());
  EXPECT_EQ(recipe_to_json(none)["keep_bf16_layers"], 0);
  EXPECT_FALSE(recipe_from_json(recipe_to_json(none), "n").keep_bf16.any());
  EXPECT_FALSE(mix_recipe(none, recipe_preset("fp32"), kAllRoleParts).keep_bf16.any());  // attribute's mixes
  EXPECT_FALSE(recipe_from_json({{"preset", "nvfp4"}, {"keep_bf16_layers", json::array()}}, "n").keep_bf16.any());
  EXPECT_EQ(recipe_from_json({{"preset", "nvfp4"}, {"keep_bf16_layers", {0}}}, "n").keep_bf16.fraction, 0.0);
}

TEST(Nvfp4Recipe, SwitchesOnOtherRecipesAreRefusedByName) {
  EXPECT_NE(error_of({{"preset", "bf16-amp"}, {"rht", true}}).find("rht true needs an NVFP4 recipe"), std::string::npos);
  EXPECT_NE(error_of({{"preset", "mxfp8"}, {"sr_gradients", true}}).find("sr_gradients true needs an NVFP4 recipe"),
            std::string::npos);
  EXPECT_NE(error_of({{"preset", "mxfp4"}, {"four_over_six", true}}).find("four_over_six true needs an NVFP4"),
            std::string::npos);
  EXPECT_NE(error_of({{"preset", "fp8-current"}, {"weights_2d", true}}).find("weights_2d true needs an NVFP4 or MX"),
            std::string::npos);
  EXPECT_NE(error_of({{"preset", "nvfp4"}, {"mx_scale_rule", "rceil"}}).find("mx_scale_rule rceil needs an MX recipe"),
            std::string::npos);
  EXPECT_NE(error_of({{"preset", "mxfp8"}, {"mx_scale_rule", "round"}}).find("'round' is unknown; allowed: floor"),
            std::string::npos);
  EXPECT_NE(error_of({{"preset", "nvfp4"}, {"rht_size", 12}}).find("Hadamard size 12 is not allowed"), std::string::npos);
  EXPECT_NE(error_of({{"preset", "nvfp4"}, {"gemm", {{"wgrad", {{"a", {{"rounding", "nearest-even"}}}}}}}})
                .find("contradicts sr_gradients true"),
            std::string::npos);
  EXPECT_EQ(error_of({{"preset", "nvfp4"}, {"sr_gradients", false}, {"gemm", {{"wgrad", {{"a", {{"rounding", "nearest-even"}}}}}}}}),
            "");
  EXPECT_EQ(error_of({{"preset", "bf16-amp"}, {"rht", false}, {"weights_2d", false}}), "");
}

// A Hadamard size that does not divide the weight-gradient GEMM's K is refused before step 1.
TEST(Nvfp4Recipe, HadamardSizeMustDivideTheTokensOfAMicroBatch) {
  auto message = [](const json& cfg) {
    try {
      train_config_from_json(cfg);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({{"batch", 64}, {"recipes", {"nvfp4"}}}), "");
  EXPECT_NE(message({{"batch", 40}, {"recipes", {"nvfp4"}}}).find("rht_size 16 does not divide"), std::string::npos);
  EXPECT_NE(message({{"batch", 64}, {"recipes", {{{"name", "x"}, {"preset", "nvfp4"}, {"accumulation", {{"micro_batches", 8}}}}}}})
                .find("K = 8"),
            std::string::npos);
  EXPECT_EQ(message({{"batch", 40}, {"recipes", {{{"name", "x"}, {"preset", "nvfp4"}, {"rht_size", 8}}}}}), "");
  // The transformer reduces over rows x context.
  EXPECT_EQ(message({{"batch", 2}, {"model", {{"type", "transformer"}, {"context", 24}}}, {"recipes", {"nvfp4"}}}), "");
  EXPECT_NE(message({{"batch", 1}, {"model", {{"type", "transformer"}, {"context", 24}}}, {"recipes", {"nvfp4"}}})
                .find("K = 24 (1 rows per micro-batch x context 24)"),
            std::string::npos);
}

// The three products of one layer on fixed operands (out 32, in 48, 64 tokens), MLP layout.
struct Products {
  std::vector<float> qa[3], qb[3], c[3];
  StepStats st;
};

Products run_products(const Recipe& r, uint64_t seed = 5, uint32_t tensor = 0) {
  const int rows = 64, in = 48, out = 32;
  std::vector<float> x(size_t(rows) * in), w(size_t(out) * in), dy(size_t(rows) * out);
  fill_normal(x, 1, 1);
  fill_normal(w, 1, 2, 0, 0.2);
  fill_normal(dy, 1, 3, 0, 1e-3);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 30;  // outliers, as activations have
  Products p;
  const GemmSpec* specs[3] = {&r.forward, &r.dgrad, &r.wgrad};
  // forward Y = X W^T; dgrad dX = dY W (W stored out x in); wgrad dW = dY^T X.
  struct Call {
    int m, n, k;
    bool ta, tb;
    const float *a, *b;
  } calls[3] = {{rows, out, in, false, true, x.data(), w.data()},
                {rows, in, out, false, false, dy.data(), w.data()},
                {out, in, rows, true, false, dy.data(), x.data()}};
  for (int i = 0; i < 3; ++i) {
    RecipeGemm g(static_cast<GemmPass>(i), *specs[i], 16, 0);
    GemmArgs args;
    args.m = calls[i].m, args.n = calls[i].n, args.k = calls[i].k;
    args.trans_a = calls[i].ta, args.trans_b = calls[i].tb;
    p.c[i].resize(size_t(args.m) * args.n);
    OperandKeys keys;
    const uint32_t role = uint32_t(gemm_operand_role(static_cast<GemmPass>(i)));
    keys.a = SrKey{seed, 3, tensor + 2 * uint32_t(i), role};
    keys.b = SrKey{seed, 3, tensor + 2 * uint32_t(i) + 1, role};
    g.run(args, 1, calls[i].a, calls[i].b, p.c[i].data(), keys, &p.st, nullptr);
    p.qa[i].assign(g.quantized_a().begin(), g.quantized_a().end());
    p.qb[i].assign(g.quantized_b().begin(), g.quantized_b().end());
  }
  return p;
}

Recipe with(const json& patch) {
  json j = patch;
  j["preset"] = "nvfp4";
  for (const char* k : {"rht", "weights_2d", "sr_gradients", "four_over_six"})
    if (!j.contains(k)) j[k] = false;
  return recipe_from_json(j, "r");
}

// Which of the six operands (forward a/b, dgrad a/b, wgrad a/b) differ between two recipes, as a
// string of six 0/1; and that the role statistics of the unchanged passes are identical.
std::string changed(const Recipe& base, const Recipe& other) {
  const Products p = run_products(base), q = run_products(other);
  std::string s;
  for (int i = 0; i < 3; ++i) {
    const bool da = !same_bits(p.qa[i], q.qa[i]), db = !same_bits(p.qb[i], q.qb[i]);
    s += da ? '1' : '0';
    s += db ? '1' : '0';
    const size_t role = size_t(gemm_operand_role(static_cast<GemmPass>(i)));
    if (!da && !db) EXPECT_EQ(p.st.roles[role], q.st.roles[role]) << "pass " << i;
  }
  return s;
}

TEST(Nvfp4Recipe, EverySwitchChangesExactlyTheRoundingItNames) {
  const Recipe off = with({});
  EXPECT_EQ(changed(off, with({})), "000000");
  EXPECT_EQ(changed(off, with({{"weights_2d", true}})), "010100");    // W in forward and dgrad
  EXPECT_EQ(changed(off, with({{"sr_gradients", true}})), "001010");  // dY in dgrad and wgrad
  EXPECT_EQ(changed(off, with({{"rht", true}})), "000011");           // both wgrad operands
  EXPECT_EQ(changed(off, with({{"four_over_six", true}})), "111111");  // every NVFP4 operand
  // Stochastic rounding in the forward pass, the paper's harmful variant, is the forward operands'
  // own rounding key.
  EXPECT_EQ(changed(off, with({{"gemm", {{"forward", {{"a", {{"rounding", "stochastic"}}}, {"b", {{"rounding", "stochastic"}}}}}}}})),
            "110000");
  // Role statistics see the switch: SR flushes fewer small gradients than nearest rounding.
  const Products n = run_products(off), s = run_products(with({{"sr_gradients", true}}));
  const size_t wg = size_t(Role::kGemmInWgrad);
  EXPECT_NE(n.st.roles[wg].underflow_to_zero, s.st.roles[wg].underflow_to_zero);
}

// 16x16 weight blocks: the forward pass (W, blocks along its rows) and the backward pass (W
// stored the same, blocks down its columns; or the transformer's copy W^T) see the same values.
TEST(Nvfp4Recipe, TwoDimensionalWeightsAreTheSameInBothPasses) {
  for (bool two_d : {true, false}) {
    const Products p = run_products(with({{"weights_2d", two_d}}));
    EXPECT_EQ(same_bits(p.qb[0], p.qb[1]), two_d);
    // The transformer's layout: W^T (in x out) quantized along its rows.
    const Recipe r = with({{"weights_2d", two_d}});
    const int in = 48, out = 32;
    std::vector<float> w(size_t(out) * in), wt(w.size()), qt(w.size());
    fill_normal(w, 1, 2, 0, 0.2);
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) wt[size_t(i) * out + o] = w[size_t(o) * in + i];
    OperandQuantizer dq(r.dgrad.b, 16, 0);
    dq.apply(wt, qt, in, out, 1, SrKey{}, nullptr, nullptr);
    bool same = true;
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) same &= qt[size_t(i) * out + o] == p.qb[0][size_t(o) * in + i];
    EXPECT_EQ(same, two_d);
  }
}

// The transform uses the signs of the run's seed, whatever the layer (tensor id) or step: the
// quantized wgrad operands equal NVFP4 of the operands transformed with hadamard_signs(16, seed).
TEST(Nvfp4Recipe, HadamardSignsAreSharedByAllLayers) {
  const Recipe r = with({{"rht", true}});
  const Products l0 = run_products(r, 5, 0), l7 = run_products(r, 5, 70), other = run_products(r, 6, 0);
  EXPECT_TRUE(same_bits(l0.qb[2], l7.qb[2]));  // X^T (nearest rounding): a different layer, same signs
  EXPECT_FALSE(same_bits(l0.qb[2], other.qb[2]));
  // Independently: X (rows 64 x in 48) transformed down its 64 rows, then NVFP4 along them.
  std::vector<float> x(64 * 48), q(x.size());
  fill_normal(x, 1, 1);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 30;
  random_hadamard_transform(std::span<float>(x), 64, 48, 0, hadamard_signs(16, 5));
  BlockScaling s = parse_block_scaling("nvfp4");
  s.axis = 0;
  block_fake_quantize(s, x, q, 64, 48);
  EXPECT_TRUE(same_bits(q, l0.qb[2]));
}

// Without quantization the transform leaves the product as it was, to FP32 rounding.
TEST(Nvfp4Recipe, HadamardKeepsTheProductAndRefusesAnIndivisibleK) {
  GemmSpec plain;
  for (OperandSpec* o : {&plain.a, &plain.b}) o->fmt.format = format_by_name("fp32");
  GemmSpec rht = plain;
  rht.hadamard = 16;
  const int m = 8, n = 8, k = 64;
  std::vector<float> a(size_t(m) * k), b(size_t(n) * k), c0(size_t(m) * n), c1(c0.size());
  fill_normal(a, 2, 1);
  fill_normal(b, 2, 2);
  GemmArgs args;
  args.m = m, args.n = n, args.k = k, args.trans_b = true;
  RecipeGemm(GemmPass::kWgrad, plain, 16, 0).run(args, 1, a.data(), b.data(), c0.data(), {}, nullptr, nullptr);
  RecipeGemm g(GemmPass::kWgrad, rht, 16, 0);
  g.run(args, 1, a.data(), b.data(), c1.data(), {}, nullptr, nullptr);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double mag = 0;
      for (int c = 0; c < k; ++c) mag += std::fabs(double(a[size_t(i) * k + c]) * b[size_t(j) * k + c]);
      // Two FP32 sums of 64 products and the transform's rounding of each operand.
      EXPECT_NEAR(c1[size_t(i) * n + j], c0[size_t(i) * n + j], 4.0 * k * std::ldexp(mag, -24)) << i << "," << j;
    }
  EXPECT_FALSE(same_bits(g.quantized_a(), a));
  args.k = 24;
  try {
    g.run(args, 1, a.data(), b.data(), c1.data(), {}, nullptr, nullptr);
    ADD_FAILURE() << "K = 24 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("size 16 does not divide the reduction dimension K = 24"), std::string::npos);
  }
}

}  // namespace
}  // namespace precsim

// Per-part recipes: a part's keys reach exactly that part's products, roundings and weights (a
// model whose every part takes another recipe computes that recipe's numbers bit for bit), layers
// are named by index or path, keep_bf16_layers selects the last layers, and bad names are refused
// with the valid ones listed.
#include <gtest/gtest.h>

#include <bit>
#include <functional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/train/part_keys.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

const json& variant(const json& run, const std::string& name) {
  for (const auto& v : run["variants"])
    if (v["name"] == name) return v;
  throw std::runtime_error("no variant " + name);
}

// The per-step training losses and the held-out losses of a variant: equal iff it computed the same numbers.
json trace(const json& run, const std::string& name) {
  const json& v = variant(run, name);
  return {v["series"]["loss"], v["evals"]["heldout_loss"], v["summary"]["local_grad_rel_err"]};
}

json mlp_config(json recipes) {
  return {{"steps", 8}, {"batch", 32}, {"shadow_every", 2}, {"log_every", 1}, {"eval_every", 4},
          {"data", {{"features", 16}, {"classes", 4}, {"train_size", 256}, {"heldout_size", 64}}},
          {"model", {{"hidden", {24}}}}, {"recipes", std::move(recipes)}};
}

json part(const char* preset, json layers) { return {{"preset", preset}, {"layers", std::move(layers)}}; }
json named(json r, const char* name) {
  r["name"] = name;
  return r;
}

TEST(RecipeParts, EveryMlpLayerOverriddenComputesTheOtherRecipeBitForBit) {
  const json amp = {{"preset", "bf16-amp"}}, fp32 = {{"preset", "fp32"}};
  const json cfg = mlp_config({"fp32", "bf16-amp",
                               named(part("bf16-amp", {{"*", fp32}}), "amp-all-fp32"),
                               named(part("fp32", {{"0", amp}, {"1", amp}}), "fp32-all-amp"),
                               named(part("fp32", {{"-1", amp}}), "fp32-last-amp"),
                               named(part("fp32", {{"1", amp}}), "fp32-1-amp"),
                               named(json{{"preset", "fp32"}, {"keep_bf16_layers", 0.3}}, "keep-fraction"),
                               named(json{{"preset", "fp32"}, {"keep_bf16_layers", {-1}}}, "keep-list"),
                               named(part("fp32", {{"0", amp}}), "fp32-0-amp")});
  const json r = run_training(train_config_from_json(cfg));
  const json& run = r["runs"][0];
  EXPECT_EQ(trace(run, "amp-all-fp32"), trace(run, "fp32"));
  EXPECT_EQ(trace(run, "fp32-all-amp"), trace(run, "bf16-amp"));
  EXPECT_EQ(trace(run, "fp32-last-amp"), trace(run, "fp32-1-amp"));
  // keep_bf16_layers 0.3 of 2 layers keeps the last one (ceil(0.6) = 1), as the list [-1] does.
  EXPECT_EQ(trace(run, "keep-fraction"), trace(run, "fp32-1-amp"));
  EXPECT_EQ(trace(run, "keep-list"), trace(run, "fp32-1-amp"));
  // One layer in BF16 is neither recipe, and which layer matters.
  EXPECT_NE(trace(run, "fp32-1-amp"), trace(run, "fp32"));
  EXPECT_NE(trace(run, "fp32-1-amp"), trace(run, "bf16-amp"));
  EXPECT_NE(trace(run, "fp32-0-amp"), trace(run, "fp32-1-amp"));
  // The report states the parts as given.
  const json keys = recipe_to_json(train_config_from_json(cfg).variants[4]);
  EXPECT_EQ(keys["layers"], json({{"-1", amp}}));
  EXPECT_EQ(recipe_to_json(recipe_from_json(keys, "x")), keys);
}

TEST(RecipeParts, EveryTransformerPartOverriddenComputesTheOtherRecipeBitForBit) {
  const json amp = {{"preset", "bf16-amp"}}, fp32 = {{"preset", "fp32"}};
  const json all_fp32 = {{"embedding", fp32}, {"blocks.*", fp32}, {"head", fp32}};
  const json all_amp = {{"embedding", amp}, {"blocks.0", amp}, {"blocks.-1", amp}, {"head", amp}};
  const json cfg = {
      {"steps", 4}, {"batch", 8}, {"shadow_every", 2}, {"log_every", 1}, {"eval_every", 2},
      {"model", {{"type", "transformer"}, {"layers", 2}, {"heads", 2}, {"width", 16}, {"context", 8}}},
      {"data", {{"kind", "copy"}, {"symbols", 5}, {"min_length", 2}, {"max_length", 3}, {"train_size", 64}, {"heldout_size", 16}}},
      {"recipes", {"fp32", "bf16-amp", "fp8-current", named(part("bf16-amp", all_fp32), "amp-all-fp32"),
                   named(part("fp32", all_amp), "fp32-all-amp"),
                   named(part("fp8-current", {{"blocks.*.attention", fp32}, {"blocks.*.mlp", fp32}, {"head", fp32}}), "fp8-products-fp32"),
                   named(part("fp32", {{"blocks.1.mlp", {{"preset", "fp8-current"}}}}), "fp32-one-mlp-fp8")}}};
  const json r = run_training(train_config_from_json(cfg));
  const json& run = r["runs"][0];
  EXPECT_EQ(trace(run, "amp-all-fp32"), trace(run, "fp32"));
  EXPECT_EQ(trace(run, "fp32-all-amp"), trace(run, "bf16-amp"));
  // fp8-current is BF16 autocast with FP8 linear products: with every product part in FP32 it is
  // bf16-amp's stored tensors around FP32 products, neither preset.
  EXPECT_NE(trace(run, "fp8-products-fp32"), trace(run, "fp8-current"));
  EXPECT_NE(trace(run, "fp8-products-fp32"), trace(run, "bf16-amp"));
  EXPECT_NE(trace(run, "fp32-one-mlp-fp8"), trace(run, "fp32"));
}

std::string error_of(const json& recipe, bool transformer = false, int layers = 2) {
  try {
    (void)PartRecipes(recipe_from_json(recipe, "r"), transformer, layers);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RecipeParts, UnknownOrOutOfRangeNamesAreRefusedWithTheValidOnes) {
  const json amp = {{"preset", "bf16-amp"}};
  EXPECT_EQ(error_of(part("fp32", {{"2", amp}})),
            "recipe 'r': layers has no part '2' in this model; valid: layer indices 0..1 (or -2..-1 from the end) and \"*\"");
  EXPECT_NE(error_of(part("fp32", {{"-3", amp}})).find("no part '-3'"), std::string::npos);
  EXPECT_NE(error_of(part("fp32", {{"blocks.0", amp}})).find("no part 'blocks.0'"), std::string::npos);
  const std::string tf = error_of(part("fp32", {{"blocks.2.mlp", amp}}), true, 2);
  EXPECT_NE(tf.find("no part 'blocks.2.mlp'"), std::string::npos) << tf;
  EXPECT_NE(tf.find("embedding, head, blocks.I, blocks.I.attention, blocks.I.mlp with I in 0..1"), std::string::npos) << tf;
  EXPECT_NE(error_of(part("fp32", {{"blocks.0.ffn", amp}}), true).find("no part 'blocks.0.ffn'"), std::string::npos);
  EXPECT_NE(error_of(part("fp32", {{"0", amp}, {"-2", amp}})).find("name the same part"), std::string::npos);
  EXPECT_NE(error_of({{"preset", "fp32"}, {"keep_bf16_layers", {5}}}).find("keep_bf16_layers: layer 5 is out of range"),
            std::string::npos);
  EXPECT_EQ(error_of(part("fp32", {{"0", {{"weights", {{"format", "e4m3"}}}}}})), "");
}

TEST(RecipeParts, PartKeysAreCheckedWhenTheRecipeIsRead) {
  auto parse_error = [](const json& j) -> std::string {
    try {
      recipe_from_json(j, "r");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(parse_error(part("fp32", {{"0", {{"optimizer_state", {{"format", "bf16"}}}}}}))
                .find("layers.0: recipe key 'optimizer_state' exists once per model"),
            std::string::npos);
  EXPECT_NE(parse_error(part("fp32", {{"0", {{"weights", {{"format", "fp7"}}}}}})).find("layers.0: weights.format"),
            std::string::npos);
  EXPECT_NE(parse_error(part("fp32", {{"0", {{"preset", "fp7"}}}})).find("layers.0: unknown recipe 'fp7'"), std::string::npos);
  EXPECT_NE(parse_error({{"preset", "fp32"}, {"keep_bf16_layers", 1.5}}).find("keep_bf16_layers 1.5 is out of range"),
            std::string::npos);
  EXPECT_NE(parse_error({{"preset", "fp32"}, {"layers", {{"0", 3}}}}).find("layers.0: expected an object"), std::string::npos);
}

TEST(RecipeParts, RolePatchCarriesExactlyItsGroup) {
  const Recipe fp8 = recipe_preset("fp8-current"), fp32 = recipe_preset("fp32");
  const Recipe w = mix_recipe(fp32, fp8, kPartWeights);
  EXPECT_EQ(w.weights.name, "bf16");
  EXPECT_EQ(w.forward.b.fmt.name, "e4m3");
  EXPECT_EQ(w.dgrad.b.fmt.name, "e4m3");
  EXPECT_EQ(w.forward.a.fmt.name, "fp32");
  EXPECT_EQ(w.wgrad.b.fmt.name, "fp32");
  EXPECT_EQ(w.activations.name, "fp32");
  const Recipe g = mix_recipe(fp32, fp8, kPartActivationGrads);
  EXPECT_EQ(g.dgrad.a.fmt.name, "e5m2");
  EXPECT_EQ(g.wgrad.a.fmt.name, "e5m2");
  EXPECT_EQ(g.dgrad.b.fmt.name, "fp32");
  EXPECT_EQ(g.activation_grads.name, "bf16");
  // Every group together is the donor.
  json all = recipe_keys_json(mix_recipe(fp32, fp8, kAllRoleParts)), want = recipe_keys_json(fp8);
  all.erase("preset");
  want.erase("preset");
  EXPECT_EQ(all, want);
}

TEST(RecipeParts, NvfpSwitchesFollowTheOperandsAMixGives) {
  // The NVFP4 recipe's switches act on operands; a mix that restores those operands to FP32 must
  // build (attribute's counterfactuals) and leave no transform or stochastic rounding on them.
  const Recipe nv = recipe_preset("nvfp4"), fp32 = recipe_preset("fp32");
  ASSERT_TRUE(nv.block.rht && nv.block.sr_gradients && nv.block.weights_2d);
  const Recipe high = mix_recipe(nv, fp32, kAllRoleParts);
  EXPECT_FALSE(high.block.rht || high.block.sr_gradients || high.block.weights_2d);
  EXPECT_EQ(high.wgrad.hadamard, 0);
  EXPECT_EQ(high.dgrad.a.fmt.rounding, Rounding::kNearestEven);
  // Leave-one-out of the weights: the gradient operands stay NVFP4 with SR, the wgrad GEMM keeps RHT.
  const Recipe no_w = mix_recipe(nv, fp32, kPartWeights);
  EXPECT_TRUE(no_w.block.rht && no_w.block.sr_gradients);
  EXPECT_FALSE(no_w.forward.b.two_d);
  EXPECT_EQ(no_w.dgrad.a.fmt.rounding, Rounding::kStochastic);
  // Leave-one-in of the activation gradients: FP32 with NVFP4 gradient operands keeps their SR.
  const Recipe only_g = mix_recipe(high, nv, kPartActivationGrads);
  EXPECT_TRUE(only_g.block.sr_gradients);
  EXPECT_EQ(only_g.dgrad.a.fmt.rounding, Rounding::kStochastic);
  EXPECT_EQ(only_g.dgrad.b.fmt.name, "fp32");
}

// The recipe algebra's meaning, written as the JSON merge patch it is defined by: the base's keys,
// the donor's keys of the groups (role_patch) merged over them, the NVFP4 / MX switches turned off
// where the operands they act on are no longer NVFP4 (MX), and the whole object read back. The
// typed mix_recipe must give the same recipe, or refuse with the same message.
void json_keep_block_switches(json& j) {
  auto scaling = [&](const char* pass, const char* side) { return j["gemm"][pass][side]["scaling"].get<std::string>(); };
  bool nv = false, mx = false;
  for (const char* pass : {"forward", "dgrad", "wgrad"})
    for (const char* side : {"a", "b"}) nv |= scaling(pass, side) == "nvfp4", mx |= scaling(pass, side) == "mx";
  if (scaling("wgrad", "a") != "nvfp4" && scaling("wgrad", "b") != "nvfp4") j["rht"] = false;
  auto stochastic_nv = [&](const char* pass) {
    return scaling(pass, "a") == "nvfp4" && j["gemm"][pass]["a"]["rounding"] == "stochastic";
  };
  j["sr_gradients"] = stochastic_nv("dgrad") || stochastic_nv("wgrad");
  if (!nv) j["four_over_six"] = false;
  if (!nv && !mx) j["weights_2d"] = false;
  if (!mx) j["mx_scale_rule"] = "floor";
}

// The mix as text, or "error: ..." when it is refused.
std::string mixed_text(const std::function<Recipe()>& make) {
  try {
    return recipe_to_json(make()).dump();
  } catch (const std::invalid_argument& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(RecipeParts, TypedMixEqualsTheJsonMergePatch) {
  std::vector<uint32_t> masks = {kLayerParts, kAllRoleParts, kPartForward | kPartWgrad, kPartWeights | kPartWeightGrads};
  for (int b = 0; b < 11; ++b) masks.push_back(1u << b);
  int mixes = 0, refused = 0;
  for (const auto& bn : recipe_preset_names())
    for (const auto& dn : recipe_preset_names()) {
      const Recipe base = recipe_preset(bn), donor = recipe_preset(dn);
      for (uint32_t bits : masks) {
        const std::string typed = mixed_text([&] { return mix_recipe(base, donor, bits); });
        const std::string by_json = mixed_text([&] {
          json j = recipe_keys_json(base);
          j.merge_patch(role_patch(donor, bits));
          json_keep_block_switches(j);
          Recipe r = recipe_from_json(j, base.name);
          r.parts = base.parts;
          r.keep_bf16 = base.keep_bf16;
          return r;
        });
        ASSERT_EQ(typed, by_json) << bn << " <- " << dn << " bits " << bits;
        ++mixes;
        refused += typed.starts_with("error: ");
      }
    }
  EXPECT_EQ(mixes, 26 * 26 * 15);
  // Some mixes are refused (both ways alike): an NVFP4 dgrad operand taken alone keeps SR, which
  // sr_gradients then asks of the FP32 wgrad operand the mix left nearest.
  EXPECT_GT(refused, 0);
}

// The per-layer patches the tests read as typed parts.
std::vector<json> part_patches() {
  return {
      {{"preset", "bf16-amp"}},
      {{"preset", "fp32"}, {"weights", {{"format", "fp16"}}}},
      {{"gemm", {{"forward", {{"a", {{"format", "e5m2"}}}, {"accum", "h100"}}}}}},
      {{"preset", "mxfp8"}, {"weights_2d", true}},
      {{"activations", {{"format", "fp16"}}}, {"attention", {{"opmath", "low"}}}},
      {{"gemm", {{"dgrad", {{"a", {{"rounding", "nearest-even"}}}}}}}},
      {{"attention", {{"scores", {{"format", "bf16"}, {"rounding", "stochastic"}}}, {"products", "recipe"}}}},
      {{"weight_grads", {{"format", "e5m2"}, {"rounding", "stochastic"}}}, {"gemm", {{"wgrad", {{"b", {{"block", 16}, {"scaling", "rowwise"}, {"format", "e4m3"}}}}}}}},
  };
}

TEST(RecipeParts, TypedPartPatchEqualsTheJsonMergePatch) {
  const std::vector<json> patches = part_patches();
  int compared = 0;
  for (const auto& bn : recipe_preset_names())
    for (const json& patch : patches) {
      const Recipe base = recipe_preset(bn);
      const std::string typed = mixed_text([&] { return apply_part(base, part_from_json("0", patch, base)); });
      const std::string by_json = mixed_text([&] {
        try {
          json j = recipe_keys_json(base), keys = patch;
          if (keys.contains("preset")) {
            j.merge_patch(role_patch(recipe_preset(keys["preset"].get<std::string>()), kLayerParts, true));
            keys.erase("preset");
          }
          j.merge_patch(keys);
          json_keep_block_switches(j);
          Recipe r = recipe_from_json(j, base.name);
          r.keep_bf16 = base.keep_bf16;
          return r;
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string("layers.0: ") + e.what());
        }
      });
      EXPECT_EQ(typed, by_json) << bn << " with " << patch.dump();
      ++compared;
    }
  EXPECT_EQ(compared, 26 * 8);
}

TEST(RecipeParts, TypedPartWritesBackExactlyTheKeysItWasGiven) {
  // The leaf table and the JSON edge agree: every leaf of every patch is found, nothing is added.
  EXPECT_EQ(part_key_table().size(), 45u);  // 4 x 2 tensor formats, 3 x (2 x 4 + 1) GEMM, 4 attention, 6 switches
  for (const json& patch : part_patches()) {
    const RecipePart p = part_from_json("0", patch, recipe_preset("fp32"));
    EXPECT_EQ(part_to_json(p), patch);
    EXPECT_EQ(p, part_from_json("0", part_to_json(p), recipe_preset("nvfp4")));
  }
  EXPECT_EQ(std::popcount(part_keys_at({"gemm.forward.a"})), 4);
  EXPECT_EQ(std::popcount(part_keys_at({"gemm.forward"})), 9);
  EXPECT_THROW(part_keys_at({"gemm.forward.c"}), std::invalid_argument);
  EXPECT_THROW(part_keys_at({"master_weights"}), std::invalid_argument);
}

TEST(RecipeParts, TypedPartReadOnOneRecipeAppliesToAnyOther) {
  // A part's values are the keys it was given, whatever recipe it was read against.
  int compared = 0;
  for (const json& patch : part_patches())
    for (const auto& bn : recipe_preset_names()) {
      const Recipe base = recipe_preset(bn);
      const RecipePart on_fp32 = part_from_json("0", patch, recipe_preset("fp32"));
      const RecipePart on_base = part_from_json("0", patch, base);
      EXPECT_EQ(mixed_text([&] { return apply_part(base, on_fp32); }),
                mixed_text([&] { return apply_part(base, on_base); }))
          << bn << " with " << patch.dump();
      ++compared;
    }
  EXPECT_EQ(compared, 8 * 26);
}

TEST(RecipeParts, PartFromRolesEqualsTheRolePatch) {
  std::vector<uint32_t> masks = {kLayerParts, kPartForward | kPartWgrad, kPartWeights | kPartWeightGrads};
  for (int b = 0; b < 4; ++b) masks.push_back(1u << b);
  for (int b = 8; b < 11; ++b) masks.push_back(1u << b);
  int compared = 0;
  for (const auto& dn : recipe_preset_names())
    for (uint32_t bits : masks) {
      const Recipe donor = recipe_preset(dn);
      const RecipePart typed = part_from_roles("0", donor, bits);
      const json patch = role_patch(donor, bits, true);
      ASSERT_EQ(part_to_json(typed), patch) << dn << " bits " << bits;
      for (const char* bn : {"fp32", "bf16-amp", "nvfp4", "mxfp8"}) {
        const Recipe base = recipe_preset(bn);
        EXPECT_EQ(mixed_text([&] { return apply_part(base, typed); }),
                  mixed_text([&] { return apply_part(base, part_from_json("0", patch, base)); }))
            << bn << " <- " << dn << " bits " << bits;
      }
      ++compared;
    }
  EXPECT_EQ(compared, 26 * 10);
}

}  // namespace
}  // namespace precsim

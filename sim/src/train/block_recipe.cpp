// The NVFP4 recipe's switches and the MX scale rule, applied to a recipe's GEMM operand specs.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "precsim/formats/hadamard.h"
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {
namespace {

// The operands of a recipe with what each holds: weights, gradients, or anything else.
struct Operands {
  OperandSpec* all[6];
  OperandSpec* weights[2];    // forward.b = W, dgrad.b = W^T
  OperandSpec* gradients[2];  // dgrad.a = dY, wgrad.a = dY^T
};

Operands operands(Recipe& r) {
  return {{&r.forward.a, &r.forward.b, &r.dgrad.a, &r.dgrad.b, &r.wgrad.a, &r.wgrad.b},
          {&r.forward.b, &r.dgrad.b},
          {&r.dgrad.a, &r.wgrad.a}};
}

void refuse(const Recipe& r, std::string_view key, std::string_view needs) {
  throw std::invalid_argument(fmt::format("recipe '{}': {} needs {}; this recipe has none (gemm operand scalings: "
                                          "forward {}/{}, dgrad {}/{}, wgrad {}/{})",
                                          r.name, key, needs, to_string(r.forward.a.scaling),
                                          to_string(r.forward.b.scaling), to_string(r.dgrad.a.scaling),
                                          to_string(r.dgrad.b.scaling), to_string(r.wgrad.a.scaling),
                                          to_string(r.wgrad.b.scaling)));
}

}  // namespace

bool uses_scaling(const Recipe& r, Scaling s) {
  for (const OperandSpec* o : {&r.forward.a, &r.forward.b, &r.dgrad.a, &r.dgrad.b, &r.wgrad.a, &r.wgrad.b})
    if (o->scaling == s) return true;
  return false;
}

void apply_block_recipe(Recipe& r) {
  const BlockRecipe& b = r.block;
  const bool nvfp4 = uses_scaling(r, Scaling::kNvfp4), mx = uses_scaling(r, Scaling::kMx);
  const char* kNv = "an NVFP4 recipe (a gemm operand with scaling nvfp4)";
  if (b.rht && !nvfp4) refuse(r, "rht true", kNv);
  if (b.sr_gradients && !nvfp4) refuse(r, "sr_gradients true", kNv);
  if (b.four_over_six && !nvfp4) refuse(r, "four_over_six true", kNv);
  if (b.weights_2d && !nvfp4 && !mx) refuse(r, "weights_2d true", "an NVFP4 or MX recipe (scaling nvfp4 or mx)");
  if (b.mx_scale_rule != ScaleRule::kFloor && !mx)
    refuse(r, fmt::format("mx_scale_rule {}", to_string(b.mx_scale_rule)), "an MX recipe (scaling mx)");
  try {
    check_hadamard_size(b.rht_size);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("recipe '{}': rht_size: {}", r.name, e.what()));
  }
  Operands ops = operands(r);
  for (OperandSpec* o : ops.all) {
    o->two_d = false;
    o->four_over_six = b.four_over_six && o->scaling == Scaling::kNvfp4;
    o->mx_rule = b.mx_scale_rule;
  }
  for (OperandSpec* o : ops.weights) o->two_d = b.weights_2d && (o->scaling == Scaling::kNvfp4 || o->scaling == Scaling::kMx);
  // An NVFP4 recipe's gradient rounding is the switch's; other recipes keep their own.
  if (nvfp4)
    for (OperandSpec* o : ops.gradients) o->fmt.rounding = b.sr_gradients ? Rounding::kStochastic : Rounding::kNearestEven;
  r.wgrad.hadamard = b.rht ? b.rht_size : 0;
  // Every operand's scheme is built here once, so that a format the scaling cannot take is refused
  // when the recipe is read, naming the recipe and the operand.
  static constexpr const char* kNames[] = {"forward.a", "forward.b", "dgrad.a", "dgrad.b", "wgrad.a", "wgrad.b"};
  for (int i = 0; i < 6; ++i) try {
      (void)operand_scaling(*ops.all[i], r.margin);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("recipe '{}': gemm.{}: {}", r.name, kNames[i], e.what()));
    }
}

void check_gradient_roundings(const Recipe& r, std::optional<Rounding> dgrad_a, std::optional<Rounding> wgrad_a) {
  if (!uses_scaling(r, Scaling::kNvfp4)) return;
  for (const auto& [pass, spec, given] : {std::tuple{"dgrad", &r.dgrad, dgrad_a}, std::tuple{"wgrad", &r.wgrad, wgrad_a}})
    if (given && *given != spec->a.fmt.rounding)
      throw std::invalid_argument(fmt::format(
          "recipe '{}': gemm.{}.a.rounding '{}' contradicts sr_gradients {} (which makes it {}); set sr_gradients instead",
          r.name, pass, to_string(*given), r.block.sr_gradients, to_string(spec->a.fmt.rounding)));
}

}  // namespace precsim

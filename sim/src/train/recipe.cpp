// The names of a recipe's enumerations.
#include "precsim/sim/train/recipe.h"

#include <fmt/format.h>

#include <stdexcept>

namespace precsim {

std::string_view to_string(Role r) {
  static constexpr std::string_view kNames[] = {"weights",     "master_weights",   "activations",
                                                "gemm_in_forward", "gemm_in_dgrad", "gemm_in_wgrad",
                                                "activation_grads", "weight_grads", "optimizer_state",
                                                "grad_accumulation", "allreduce"};
  return kNames[static_cast<int>(r)];
}

std::string_view to_string(Scaling s) {
  switch (s) {
    case Scaling::kNone: return "none";
    case Scaling::kTensorCurrent: return "tensor-current";
    case Scaling::kTensorDelayed: return "tensor-delayed";
    case Scaling::kRowwise: return "rowwise";
    case Scaling::kBlock2d: return "block2d";
    case Scaling::kMx: return "mx";
    case Scaling::kNvfp4: return "nvfp4";
  }
  return "?";
}

Scaling parse_scaling(std::string_view s) {
  for (Scaling v : {Scaling::kNone, Scaling::kTensorCurrent, Scaling::kTensorDelayed, Scaling::kRowwise,
                    Scaling::kBlock2d, Scaling::kMx, Scaling::kNvfp4})
    if (s == to_string(v)) return v;
  throw std::invalid_argument(fmt::format(
      "unknown scaling '{}'; allowed: none, tensor-current, tensor-delayed, rowwise, block2d, mx, nvfp4", s));
}

std::optional<ScaleRule> parse_mx_rule(std::string_view name) {
  for (ScaleRule r : {ScaleRule::kFloor, ScaleRule::kCeil, ScaleRule::kEven, ScaleRule::kRceil})
    if (name == to_string(r)) return r;
  return std::nullopt;
}

}  // namespace precsim

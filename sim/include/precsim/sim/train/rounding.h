// Rounding a tensor into its role's format at a rounding point of a step: the one place every
// trainer, the numerics and the optimizer update round through, with the role's statistics.
#pragma once

#include <cstdint>
#include <span>

#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// Whether rounding into tf leaves every value of T unchanged (always without a recipe).
template <class T>
bool format_holds_type(const TensorFormat& tf);

// Rounds v in place into tf with stochastic-rounding key (seed, step, tensor, role); counts its
// statistics and non-zero finite inputs into st under role (st may be null).
template <class T>
void round_role(std::span<T> v, const TensorFormat& tf, Role role, uint64_t seed, uint64_t step, uint32_t tensor,
                StepStats* st);

}  // namespace precsim

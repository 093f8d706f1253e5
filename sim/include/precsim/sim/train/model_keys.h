// The two models' key plans (model/numerics.h's ModelKeys) in sr_keys.h's id layout: the MLP names
// each rounding by layer and slot and each product operand by layer, pass and side; the transformer
// counts its tensors within a step key and slots its delayed-scaling histories by block, site, pass.
#pragma once

#include "precsim/sim/model/numerics.h"

namespace precsim {

const ModelKeys& mlp_keys();
const ModelKeys& transformer_keys();

}  // namespace precsim

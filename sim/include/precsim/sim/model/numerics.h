// What the models and the trainers share about a step's arithmetic: the one name for the matrix
// products of a training step (GemmPass), used by the model code (transformer.h's TfNumerics), the
// trainers, the stochastic-rounding key scheme (train/sr_keys.h) and where a variant's products
// run (train/step_types.h's GemmExecutor).
#pragma once

namespace precsim {

// Which GEMM of a linear product: the forward product, the input gradient (dgrad) or the weight
// gradient (wgrad). The attention's backward products count as dgrad (dP, dQ) and wgrad (dV, dK)
// by their operand roles. The values index the recipe's forward/dgrad/wgrad specs and are part of
// the stochastic-rounding and delayed-scaling keys.
enum class GemmPass : int { kForward = 0, kDgrad = 1, kWgrad = 2 };
constexpr int kGemmPasses = 3;

}  // namespace precsim

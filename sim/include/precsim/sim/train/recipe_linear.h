// A recipe's matrix product and linear layer on their own, for front-ends that own the rest of a
// model (precsim.torch: Linear, matmul): each of forward, dgrad and wgrad runs as the MLP trainer
// runs it (operands quantized through RecipeGemm along K, the pass's accumulation model) and is
// rounded where the trainer rounds: weights into the weights format, the layer output into the
// activations format, the incoming gradient and dX into the activation-gradient format, dW and db
// into the weight-gradient format. Stochastic-rounding keys are the MLP's for layer `layer`
// (sr_keys.h); delayed-scaling histories live in the object, one per operand of each pass.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_gemm.h"

namespace precsim {

class RecipeLinear {
 public:
  // Throws std::invalid_argument naming a bad accumulation model or operand scheme.
  RecipeLinear(const Recipe& r, uint64_t seed, int layer);
  const Recipe& recipe() const { return recipe_; }

  // C (m, n) = op(A) op(B) in `pass`, operands laid out as GemmArgs says (trans_a: A stored (k, m);
  // trans_b: B stored (n, k)).
  void product(GemmPass pass, const float* a, bool trans_a, const float* b, bool trans_b, float* c, int m, int n,
               int k, uint64_t step);

  // v rounded in place into the recipe's weights format (a weight or bias tensor; the cast of a
  // step). `tensor` separates the tensors of one layer under stochastic rounding.
  void cast_weights(std::span<float> v, uint32_t tensor, uint64_t step);
  // y (rows, out) = x wc^T + bc, rounded into the activations format; wc (out, in) and bc (out, or
  // empty) already cast.
  void forward(std::span<const float> x, std::span<const float> wc, std::span<const float> bc, std::span<float> y,
               int rows, int in, int out, uint64_t step);
  // From dy (rows, out), rounded into the activation-gradient format first: dw (out, in) = dy^T x
  // and db (out, or empty) = the sum of dy's rows in order, both rounded into the weight-gradient
  // format, and dx (rows, in) = dy wc, rounded into the activation-gradient format (dx may be empty:
  // the first layer needs none).
  void backward(std::span<const float> dy, std::span<const float> x, std::span<const float> wc, std::span<float> dx,
                std::span<float> dw, std::span<float> db, int rows, int in, int out, uint64_t step);

 private:
  void round(std::span<float> v, const TensorFormat& tf, Role role, uint32_t tensor, uint64_t step);

  Recipe recipe_;
  uint64_t seed_;
  int layer_;
  std::array<RecipeGemm, 3> gemms_;
  std::array<std::shared_ptr<DelayedScaling>, 6> delayed_;
  std::vector<float> dy_;
};

}  // namespace precsim

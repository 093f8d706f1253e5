#include "precsim/sim/train/recipe_linear.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/model/layers.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {

RecipeLinear::RecipeLinear(const Recipe& r, uint64_t seed, int layer) : recipe_(r), seed_(seed), layer_(layer) {
  const GemmSpec* specs[3] = {&recipe_.forward, &recipe_.dgrad, &recipe_.wgrad};
  for (int p = 0; p < 3; ++p)
    gemms_[size_t(p)] = RecipeGemm(static_cast<GemmPass>(p), *specs[p], recipe_.amax_history_len, recipe_.margin);
}

void RecipeLinear::product(GemmPass pass, const float* a, bool trans_a, const float* b, bool trans_b, float* c, int m,
                           int n, int k, uint64_t step) {
  if (m < 1 || n < 1 || k < 1)
    throw std::invalid_argument("product shape m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                                std::to_string(k) + ": every dimension must be at least 1");
  GemmArgs args;
  args.m = m, args.n = n, args.k = k, args.trans_a = trans_a, args.trans_b = trans_b;
  const uint32_t role = uint32_t(gemm_operand_role(pass));
  OperandKeys keys;
  keys.a = SrKey{seed_, step, sr_keys::mlp_gemm(layer_, pass, 0), role};
  keys.b = SrKey{seed_, step, sr_keys::mlp_gemm(layer_, pass, 1), role};
  keys.delayed_a = &delayed_[size_t(pass) * 2];
  keys.delayed_b = &delayed_[size_t(pass) * 2 + 1];
  gemms_[size_t(pass)].run(args, 1, a, b, c, keys, nullptr, nullptr);
}

void RecipeLinear::round(std::span<float> v, const TensorFormat& tf, Role role, uint32_t tensor, uint64_t step) {
  round_role(v, tf, role, seed_, step, tensor, nullptr);
}

void RecipeLinear::cast_weights(std::span<float> v, uint32_t tensor, uint64_t step) {
  round(v, recipe_.weights, Role::kWeights, sr_keys::kWeightCast + tensor, step);
}

void RecipeLinear::forward(std::span<const float> x, std::span<const float> wc, std::span<const float> bc,
                           std::span<float> y, int rows, int in, int out, uint64_t step) {
  if (x.size() != size_t(rows) * in || wc.size() != size_t(out) * in || y.size() != size_t(rows) * out ||
      (!bc.empty() && bc.size() != size_t(out)))
    throw std::invalid_argument("linear forward: sizes do not match rows " + std::to_string(rows) + ", in " +
                                std::to_string(in) + ", out " + std::to_string(out));
  product(GemmPass::kForward, x.data(), false, wc.data(), true, y.data(), rows, out, in, step);
  if (!bc.empty()) bias_forward(y.data(), bc.data(), rows, out);
  round(y, recipe_.activations, Role::kActivations, sr_keys::mlp_forward(layer_, sr_keys::MlpForward::kLinearOut),
        step);
}

void RecipeLinear::backward(std::span<const float> dy, std::span<const float> x, std::span<const float> wc,
                            std::span<float> dx, std::span<float> dw, std::span<float> db, int rows, int in, int out,
                            uint64_t step) {
  if (dy.size() != size_t(rows) * out || x.size() != size_t(rows) * in || wc.size() != size_t(out) * in ||
      dw.size() != size_t(out) * in || (!dx.empty() && dx.size() != size_t(rows) * in) ||
      (!db.empty() && db.size() != size_t(out)))
    throw std::invalid_argument("linear backward: sizes do not match rows " + std::to_string(rows) + ", in " +
                                std::to_string(in) + ", out " + std::to_string(out));
  using sr_keys::MlpBackward;
  dy_.assign(dy.begin(), dy.end());
  round(dy_, recipe_.activation_grads, Role::kActivationGrads, sr_keys::kLossGrad, step);
  // dW = dy^T x: A = dy stored (rows, out) transposed, B = x (rows, in); K = rows.
  product(GemmPass::kWgrad, dy_.data(), true, x.data(), false, dw.data(), out, in, rows, step);
  round(dw, recipe_.weight_grads, Role::kWeightGrads, sr_keys::mlp_backward(layer_, MlpBackward::kWeightGrad), step);
  if (!db.empty()) {
    std::fill(db.begin(), db.end(), 0.0f);
    bias_backward(db.data(), dy_.data(), rows, out);
    round(db, recipe_.weight_grads, Role::kWeightGrads, sr_keys::mlp_backward(layer_, MlpBackward::kBiasGrad), step);
  }
  if (dx.empty()) return;
  // dX = dy W: A = dy (rows, out), B = W stored (out, in); K = out.
  product(GemmPass::kDgrad, dy_.data(), false, wc.data(), false, dx.data(), rows, in, out, step);
  round(dx, recipe_.activation_grads, Role::kActivationGrads, sr_keys::mlp_backward(layer_, MlpBackward::kInputGrad),
        step);
}

}  // namespace precsim

#include "precsim/sim/train/recipe_gemm.h"

#include <cfloat>
#include <cmath>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/hadamard.h"

namespace precsim {
namespace {

uint64_t count_nonzero(const float* v, size_t n) {
  uint64_t c = 0;
  // Non-zero and finite (NaN fails both comparisons), in a form the compiler vectorises.
  for (size_t i = 0; i < n; ++i) c += (v[i] != 0.0f) & (std::fabs(v[i]) <= FLT_MAX);
  return c;
}

}  // namespace

Role gemm_operand_role(GemmPass pass) {
  switch (pass) {
    case GemmPass::kForward: return Role::kGemmInForward;
    case GemmPass::kDgrad: return Role::kGemmInDgrad;
    case GemmPass::kWgrad: return Role::kGemmInWgrad;
  }
  throw std::logic_error("gemm_operand_role: unknown pass");
}

RecipeGemm::RecipeGemm(GemmPass pass, const GemmSpec& spec, int amax_history_len, int margin)
    : pass_(pass),
      accum_(parse_accum_model(spec.accum)),
      a_(spec.a, amax_history_len, margin),
      b_(spec.b, amax_history_len, margin),
      hadamard_(spec.hadamard) {
  // The operand quantizers hand gemm() dequantized FP32 values, not elements and scales, which
  // the block-scaled instructions need (README, Accumulation models).
  if (accum_.kind == AccumKind::kBlockFma && accum_.block.in_instruction_scales)
    throw std::invalid_argument("accumulation model '" + spec.accum +
                                "' applies block scales inside the instruction; a recipe's GEMMs take dequantized "
                                "operands without their scales, so it is usable in gemm() with BlockScales but "
                                "not yet in recipes (b200-fp8 models the same unit without scales)");
  if (hadamard_) check_hadamard_size(hadamard_);
}

// Copies of both operands transformed along K (the random Hadamard transform of the NVFP4 recipe).
void RecipeGemm::transform(const float*& a, size_t a_rows, size_t a_cols, int a_axis, const float*& b, size_t b_rows,
                           size_t b_cols, int b_axis, int k, uint64_t seed) {
  if (k % hadamard_ != 0)
    throw std::invalid_argument(fmt::format("random Hadamard transform of size {} does not divide the reduction dimension "
                                            "K = {} of the {} GEMM", hadamard_, k, to_string(role())));
  if (signs_.empty() || signs_seed_ != seed) signs_ = hadamard_signs(hadamard_, seed), signs_seed_ = seed;
  ta_.resize(a_rows * a_cols);
  tb_.resize(b_rows * b_cols);
  random_hadamard_transform(std::span<const float>(a, ta_.size()), ta_, a_rows, a_cols, a_axis, signs_);
  random_hadamard_transform(std::span<const float>(b, tb_.size()), tb_, b_rows, b_cols, b_axis, signs_);
  a = ta_.data();
  b = tb_.data();
}

void RecipeGemm::run(GemmArgs args, int batch, const float* a, const float* b, float* c, const OperandKeys& keys,
                     StepStats* st, GemmExecutor* executor) {
  if (batch > 1 && (args.trans_a || !args.trans_b))
    throw std::logic_error("RecipeGemm::run: stacked products need A (m,k) and B stored (n,k)");
  const int m = args.m, n = args.n, k = args.k;
  // Storage shapes of one product, and the axis of K in each.
  const size_t ar = args.trans_a ? k : m, ac = args.trans_a ? m : k, br = args.trans_b ? n : k,
               bc = args.trans_b ? k : n;
  const size_t sa = ar * ac, sb = br * bc, sc = size_t(m) * n;
  qa_.resize(sa * batch);
  qb_.resize(sb * batch);
  if (st) {
    const size_t r = size_t(role());
    st->role_nonzero[r] += count_nonzero(a, qa_.size()) + count_nonzero(b, qb_.size());
  }
  if (hadamard_) transform(a, ar * batch, ac, args.trans_a ? 0 : 1, b, br * batch, bc, args.trans_b ? 1 : 0, k, keys.a.seed);
  QuantStats qsa, qsb;
  args.a_format = a_.apply(std::span<const float>(a, qa_.size()), qa_, ar * batch, ac, args.trans_a ? 0 : 1, keys.a,
                           &qsa, keys.delayed_a);
  args.b_format = b_.apply(std::span<const float>(b, qb_.size()), qb_, br * batch, bc, args.trans_b ? 1 : 0, keys.b,
                           &qsb, keys.delayed_b);
  if (st) {
    const size_t r = size_t(role());
    st->roles[r] += qsa;
    st->roles[r] += qsb;
  }
  args.input_policy = InputPolicy::kTrust;
  for (int i = 0; i < batch; ++i) {
    const float* qa = qa_.data() + i * sa;
    const float* qb = qb_.data() + i * sb;
    if (executor) executor->gemm(pass_, accum_, args, qa, qb, c + i * sc);
    else gemm(accum_, args, qa, qb, c + i * sc);
  }
}

}  // namespace precsim

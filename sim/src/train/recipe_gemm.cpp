#include "precsim/sim/train/recipe_gemm.h"

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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
      accum_(spec.accum.model),
      a_(spec.a, amax_history_len, margin),
      b_(spec.b, amax_history_len, margin),
      hadamard_(spec.hadamard) {
  in_instruction_ = accum_.kind == AccumKind::kBlockFma && accum_.block.in_instruction_scales;
  if (in_instruction_) check_instruction_operands(spec);
  if (hadamard_) check_hadamard_size(hadamard_);
}

// A block-scaled instruction takes MX or NVFP4 operands whose scale format, element format and
// block length it has: refused here, before step 1, naming the operand and the model.
void RecipeGemm::check_instruction_operands(const GemmSpec& spec) const {
  const char* sfmt = accum_.block.scale_ue4m3 ? "UE4M3" : "UE8M0";
  for (const auto& [name, o] : {std::pair{"a", &spec.a}, std::pair{"b", &spec.b}}) {
    static constexpr const char* kPass[] = {"forward", "dgrad", "wgrad"};
    const std::string where = fmt::format("gemm.{}.{}", kPass[int(pass_)], name);
    const bool mx = o->scaling == Scaling::kMx, nv = o->scaling == Scaling::kNvfp4;
    if (!mx && !nv)
      throw std::invalid_argument(fmt::format(
          "{}: accumulation model '{}' applies block scales inside the instruction and takes block-scaled operands "
          "(scaling mx or nvfp4); this operand has scaling {}", where, spec.accum.spec, to_string(o->scaling)));
    if (nv != accum_.block.scale_ue4m3)
      throw std::invalid_argument(fmt::format(
          "{}: accumulation model '{}' takes {} scales; a {} operand has {} scales ({})", where, spec.accum.spec, sfmt,
          nv ? "nvfp4" : "mx", nv ? "E4M3" : "E8M0",
          nv ? "b200-mxf4nvf4 takes nvfp4 operands" : "b200-mxf8f6f4 and b200-mxf4 take mx operands"));
    // The element format and block length as gemm() checks them, on one block of zeros.
    const BlockScaling& sc = *(name[0] == 'a' ? a_ : b_).scheme();
    GemmArgs g;
    g.m = g.n = 1;
    g.k = std::max<int64_t>(sc.block_along, accum_.block.block_size);
    g.a_format = g.b_format = sc.element;
    const std::vector<float> zeros(size_t(g.k), 0.0f), ones(size_t(g.k), 1.0f);
    g.a_scales = g.b_scales = BlockScales{ones.data(), sc.block_along};
    float c = 0;
    try {
      gemm(accum_, g, zeros.data(), zeros.data(), &c);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{} ({}, blocks of {}): {}", where, operand_scheme(*o, 0), sc.block_along,
                                              e.what()));
    }
  }
}

void check_instruction_gemms(const Recipe& r) {
  const GemmSpec* specs[] = {&r.forward, &r.dgrad, &r.wgrad};
  for (int p = 0; p < kGemmPasses; ++p) {
    const AccumModel& m = specs[p]->accum.model;
    if (m.kind != AccumKind::kBlockFma || !m.block.in_instruction_scales) continue;
    try {
      RecipeGemm(static_cast<GemmPass>(p), *specs[p], r.amax_history_len, r.margin);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("recipe '{}': {}", r.name, e.what()));
    }
  }
}

// The signs of the random Hadamard transform of the NVFP4 recipe, for a product with this K.
void RecipeGemm::prepare_signs(int k, uint64_t seed) {
  if (k % hadamard_ != 0)
    throw std::invalid_argument(fmt::format("random Hadamard transform of size {} does not divide the reduction dimension "
                                            "K = {} of the {} GEMM", hadamard_, k, to_string(role())));
  if (signs_.empty() || signs_seed_ != seed) signs_ = hadamard_signs(hadamard_, seed), signs_seed_ = seed;
}

// Copies of both operands transformed along K (for the block-scaled instruction's codes).
void RecipeGemm::transform(const float*& a, size_t a_rows, size_t a_cols, int a_axis, const float*& b, size_t b_rows,
                           size_t b_cols, int b_axis) {
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
  const int a_axis = args.trans_a ? 0 : 1, b_axis = args.trans_b ? 1 : 0;
  // The transform goes into the quantization (one pass fewer for NVFP4), except where the
  // block-scaled instruction needs the transformed operands again for its codes.
  const bool copies = in_instruction_ && !executor;
  if (hadamard_) prepare_signs(k, keys.a.seed);
  if (hadamard_ && copies) transform(a, ar * batch, ac, a_axis, b, br * batch, bc, b_axis);
  QuantStats qsa, qsb;
  const std::span<const float> as(a, qa_.size()), bs(b, qb_.size());
  if (hadamard_ && !copies) {
    args.a_format = a_.apply_transformed(signs_, as, qa_, ar * batch, ac, a_axis, keys.a, &qsa, keys.delayed_a);
    args.b_format = b_.apply_transformed(signs_, bs, qb_, br * batch, bc, b_axis, keys.b, &qsb, keys.delayed_b);
  } else {
    args.a_format = a_.apply(as, qa_, ar * batch, ac, a_axis, keys.a, &qsa, keys.delayed_a);
    args.b_format = b_.apply(bs, qb_, br * batch, bc, b_axis, keys.b, &qsb, keys.delayed_b);
  }
  if (st) {
    const size_t r = size_t(role());
    st->roles[r] += qsa;
    st->roles[r] += qsb;
  }
  args.input_policy = InputPolicy::kTrust;
  if (in_instruction_ && !executor) {
    run_in_instruction(args, batch, a, b, c, keys);
    return;
  }
  for (int i = 0; i < batch; ++i) {
    const float* qa = qa_.data() + i * sa;
    const float* qb = qb_.data() + i * sb;
    if (executor) executor->gemm(pass_, accum_, args, qa, qb, c + i * sc);
    else gemm(accum_, args, qa, qb, c + i * sc);
  }
}

// The block-scaled instruction's product: the same quantization as qa_ / qb_ (the statistics
// counted there), now as element values and scales, which the instruction multiplies inside the
// fused sum; NVFP4's tensor scales act in the epilogue (gemm()'s alpha).
void RecipeGemm::run_in_instruction(GemmArgs args, int batch, const float* a, const float* b, float* c,
                                    const OperandKeys& keys) {
  const int64_t m = args.m, n = args.n, k = args.k;
  const size_t ar = args.trans_a ? k : m, ac = args.trans_a ? m : k, br = args.trans_b ? n : k, bc = args.trans_b ? k : n;
  a_.apply_codes(std::span<const float>(a, ar * ac * batch), ar * batch, ac, args.trans_a ? 0 : 1, keys.a, ia_);
  b_.apply_codes(std::span<const float>(b, br * bc * batch), br * batch, bc, args.trans_b ? 1 : 0, keys.b, ib_);
  args.a_format = ia_.element;
  args.b_format = ib_.element;
  for (int i = 0; i < batch; ++i) {
    // Stacked products have op(A) rows m and op(B) rows n per product (batch > 1 needs trans_b).
    args.a_scales = BlockScales{ia_.scales.data() + i * m * ia_.groups, ia_.block_k, 1, ia_.groups, ia_.tensor_scale};
    args.b_scales = BlockScales{ib_.scales.data() + i * n * ib_.groups, ib_.block_k, 1, ib_.groups, ib_.tensor_scale};
    gemm(accum_, args, ia_.values.data() + i * ar * ac, ib_.values.data() + i * br * bc, c + i * m * n);
  }
}

}  // namespace precsim

// One matrix product of a variant under its recipe, the same for every model's trainer: each
// operand quantized along the reduction dimension from its high-precision source (operand_quant.h),
// the role statistics of both operands counted, and the product run by the emulated gemm() or a
// GemmExecutor. The recipe's strings (accumulation model, operand schemes) are resolved once, when
// the trainer is made.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/model/numerics.h"
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// The role of a product's operands in the statistics (gemm_in_forward, _dgrad, _wgrad).
Role gemm_operand_role(GemmPass pass);

// Where one call's operands take their stochastic-rounding keys and delayed-scaling histories.
struct OperandKeys {
  SrKey a, b;
  std::shared_ptr<DelayedScaling>* delayed_a = nullptr;
  std::shared_ptr<DelayedScaling>* delayed_b = nullptr;
};

// Builds the products of a recipe whose accumulation model is a block-scaled instruction, so that
// operands it cannot take are refused when the recipe is read (std::invalid_argument naming the
// recipe, the operand and the model).
void check_instruction_gemms(const Recipe& r);

class RecipeGemm {
 public:
  RecipeGemm() = default;
  // Throws std::invalid_argument naming the bad accumulation model or operand scheme, or an operand
  // a block-scaled instruction (b200-mxf8f6f4, b200-mxf4nvf4, b200-mxf4) cannot take.
  RecipeGemm(GemmPass pass, const GemmSpec& spec, int amax_history_len, int margin);

  GemmPass pass() const { return pass_; }
  Role role() const { return gemm_operand_role(pass_); }
  // `batch` stacked products C_i = op(A_i) op(B_i), laid out as args says (the stacks follow each
  // other in memory; only batch 1 may transpose A or store B untransposed, since blocks run along
  // K). st (optional) counts both operands' roundings and non-zero inputs under role(); executor
  // null: the emulated gemm(). With a Hadamard size (GemmSpec::hadamard) both operands are
  // transformed along K before they are quantized, with the signs of keys.a.seed; a size that does
  // not divide K throws std::invalid_argument.
  void run(GemmArgs args, int batch, const float* a, const float* b, float* c, const OperandKeys& keys, StepStats* st,
           GemmExecutor* executor);
  // With a block-scaled instruction (AccumModel in_instruction_scales) the emulated product takes
  // element codes and scales (OperandQuantizer::apply_codes) and applies the scales inside the
  // instruction; a GemmExecutor still takes the dequantized operands.
  // The operands of the last run as the product saw them (quantized, dequantized, in their storage
  // layout).
  std::span<const float> quantized_a() const { return qa_; }
  std::span<const float> quantized_b() const { return qb_; }

 private:
  void prepare_signs(int k, uint64_t seed);
  void transform(const float*& a, size_t a_rows, size_t a_cols, int a_axis, const float*& b, size_t b_rows,
                 size_t b_cols, int b_axis);

  void check_instruction_operands(const GemmSpec& spec) const;
  void run_in_instruction(GemmArgs args, int batch, const float* a, const float* b, float* c, const OperandKeys& keys);

  GemmPass pass_ = GemmPass::kForward;
  AccumModel accum_;
  OperandQuantizer a_, b_;
  int hadamard_ = 0;
  std::vector<double> signs_;   // of signs_seed_, made on first use
  uint64_t signs_seed_ = 0;
  std::vector<float> ta_, tb_;  // the transformed operands (block-scaled instruction)
  std::vector<float> qa_, qb_;  // the quantized operands, reused across calls
  bool in_instruction_ = false;
  InstructionOperand ia_, ib_;  // codes and scales for a block-scaled instruction
};

}  // namespace precsim

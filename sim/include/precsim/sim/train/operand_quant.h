// Brings one GEMM operand into its recipe format along the GEMM's reduction dimension: a plain
// cast, or fake quantization through block_scaling.h (per-tensor current or delayed FP8 scaling,
// 1xN tiles, NxN blocks, MX, NVFP4), always from the high-precision source tensor.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {

// The block_scaling scheme of an operand, built from its typed fields (no text parsed): a plain
// scheme of the element for Scaling::kNone. Throws std::invalid_argument when the element format has
// no such scheme (MX with fp16 elements, tensor scaling of fp32).
BlockScaling operand_scaling(const OperandSpec& spec, int margin);
// Its name: the scheme as text ("mxfp4", "float8_e4m3fn:tensor", ...), for messages and reports.
std::string operand_scheme(const OperandSpec& spec, int margin);

// A block-scaled operand as an instruction with in-instruction scales takes it (Blackwell's
// tcgen05.mma kind::mxf8f6f4 / mxf4nvf4): the element values, unscaled, in the operand's own
// layout, and one decode scale per block for every row of op(X) (so scales[r * groups + k /
// block_k]; the rows of op(X) are the array's rows for axis 1, its columns for axis 0). A block
// with a NaN scale has scale 1 and NaN elements, which the instruction turns into NaN outputs.
struct InstructionOperand {
  Format element;
  std::vector<float> values;
  std::vector<float> scales;
  int64_t block_k = 0, groups = 0;
  float tensor_scale = 1.0f;  // NVFP4's FP32 tensor decode scale; 1 for MX
};

// One GEMM operand's quantization, its scheme resolved once when the trainer is made (an invalid
// scheme throws std::invalid_argument there, naming the format).
class OperandQuantizer {
 public:
  OperandQuantizer() = default;  // a plain FP32 cast with round-to-nearest
  OperandQuantizer(const OperandSpec& spec, int amax_history_len, int margin);
  // out = the operand as the GEMM sees it; in and out are rows x cols row-major and the blocks run
  // along `axis` (1: rows, 0: columns). `delayed` holds the amax history of delayed scaling (created
  // on first use). Returns the format the GEMM may declare for the values (the element format for
  // plain casts, fp32 for scaled values).
  Format apply(std::span<const float> in, std::span<float> out, size_t rows, size_t cols, int axis, const SrKey& key,
               QuantStats* stats, std::shared_ptr<DelayedScaling>* delayed) const;
  // apply() of the random Hadamard transform of in along `axis` (random_hadamard_transform with
  // these signs): block-scaled operands through rht_block_fake_quantize, which for NVFP4 transforms
  // and quantizes in fewer passes with the same bits; others transform into a copy first.
  Format apply_transformed(std::span<const double> signs, std::span<const float> in, std::span<float> out,
                           size_t rows, size_t cols, int axis, const SrKey& key, QuantStats* stats,
                           std::shared_ptr<DelayedScaling>* delayed) const;
  // The same quantization (same roundings and stochastic-rounding bits: element times scale times
  // tensor scale is apply()'s value) as element codes and scales. MX and NVFP4 operands only
  // (std::logic_error otherwise).
  void apply_codes(std::span<const float> in, size_t rows, size_t cols, int axis, const SrKey& key,
                   InstructionOperand& out) const;
  const OperandSpec& spec() const { return spec_; }
  // The block scheme (MX and NVFP4 operands), nullptr for plain casts.
  const BlockScaling* scheme() const { return scheme_ ? &*scheme_ : nullptr; }

 private:
  // The block scheme along `axis` with the operand's rounding and SR key.
  BlockScaling scheme_for(int axis, const SrKey& key) const;

  OperandSpec spec_;
  int history_len_ = 1024;
  int margin_ = 0;
  std::optional<BlockScaling> scheme_;  // set unless spec_.scaling is none
};

}  // namespace precsim

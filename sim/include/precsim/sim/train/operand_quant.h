// Brings one GEMM operand into its recipe format along the GEMM's reduction dimension: a plain
// cast, or fake quantization through block_scaling.h (per-tensor current or delayed FP8 scaling,
// 1xN tiles, NxN blocks, MX, NVFP4), always from the high-precision source tensor.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {

// The block_scaling scheme string of an operand ("mxfp4", "float8_e4m3fn:tensor", ...); throws
// std::invalid_argument when the element format has no such scheme (MX with fp16 elements).
std::string operand_scheme(const OperandSpec& spec, int margin);

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

 private:
  OperandSpec spec_;
  int history_len_ = 1024;
  int margin_ = 0;
  std::optional<BlockScaling> scheme_;  // set unless spec_.scaling is none
};

}  // namespace precsim

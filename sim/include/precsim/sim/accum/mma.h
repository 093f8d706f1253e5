// One matrix instruction by name, D = A B + C with C its accumulator input (`precsim mma`,
// precsim.mma): the instruction's own shape, operand types and block scales, as MMA-Sim models it
// (instruction_model.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/instruction_model.h"

namespace precsim {

// The instruction a model spec names: ARCH/INSTRUCTION[:key=value...], or a preset that picks one
// by the operand formats (pick=ARCH: the NVIDIA and AMD GPU presets). Formats not given are the
// instruction's.
struct MmaInstruction {
  AccumModel model;
  const InstructionInfo* row = nullptr;
  std::string name;  // ARCH/INSTRUCTION
  int64_t m = 0, n = 0, k = 0;
  Format a, b, c, d;
  std::optional<Format> scale;  // the block scales' format (e8m0, e4m3 for UE4M3); none: not block-scaled
  int64_t scale_block = 0;      // k per scale
};

// m, n, k: the shape of the operands, which chooses among the instructions a preset picks for the
// formats (and N and M where a name has a range of them). Throws std::invalid_argument: a spec
// that is not an instruction (listing the presets that pick), formats the instruction does not
// take, a D format it does not write.
MmaInstruction resolve_mma(const std::string& spec, const std::optional<Format>& a, const std::optional<Format>& b,
                           const std::optional<Format>& d, int64_t m, int64_t n, int64_t k);

// A (m x k), B (k x n), C (m x n) row-major, each with its shape (rows, columns); scales
// (m x k/block) and (n x k/block), empty where the instruction takes none.
struct MmaMatrix {
  std::span<const float> values;
  int64_t rows = 0, cols = 0;
};
struct MmaOperands {
  MmaMatrix a, b, c, a_scales, b_scales;
};

// D (m x n, row-major) as values of the instruction's D format. Throws std::invalid_argument
// naming the first problem: a shape that is not the instruction's (naming both), a value that is
// not one of its operand's format, scales missing, extra or of the wrong shape or format.
std::vector<double> mma(const MmaInstruction& ins, const MmaOperands& x);

}  // namespace precsim

// Private: gemm() for accumulation models whose block scales act inside the instruction
// (inscale=1, Blackwell's block-scaled tcgen05.mma).
#pragma once

#include "accum_engine.h"
#include "gemm_kernels.h"
#include "precsim/sim/accum/gemm.h"

namespace precsim::detail {

// acc (m x n) = every output's scaled_dot over K, with the scales of sa and sb (either may be
// absent: scales of 1). Throws std::invalid_argument naming the first scale block length or
// scale value the instruction cannot take.
void in_instruction_scaled_gemm(const AccumEngine& eng, const KernelArgs& ka, const BlockScales& sa,
                                const BlockScales& sb, double* acc);

}  // namespace precsim::detail

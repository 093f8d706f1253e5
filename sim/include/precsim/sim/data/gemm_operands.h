// Generated operands of matrix products (`precsim gemm`) and of all-reduces (`precsim allreduce`):
// the same seed gives the same values on any thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "precsim/sim/data/distributions.h"

namespace precsim {

// The operand distributions generate_gemm_operand takes (also the --dist help of `precsim gemm`).
inline const std::string kGemmOperandDists =
    std::string("normal: N(0,1); wide: N(0,1) * 2^u with u uniform on the integers -10..10 (wide exponent spread); "
                "cancel: A = [X X], B = [Y; -Y + 2^-8 Z] (sums of large terms that nearly cancel); or a distribution "
                "with parameters: ") +
    kDistributionSpecs;

// A (is_b false, rows M x cols K) or B (is_b true, rows K x cols N), row-major, generated from
// `seed` with a stream of its own per operand. Throws std::invalid_argument for an unknown
// distribution, the message ending in "; allowed: " kGemmOperandDists.
void generate_gemm_operand(const std::string& dist, bool is_b, int64_t rows, int64_t cols, uint64_t seed,
                           std::vector<float>& out);

// Gradients of `workers` data-parallel workers, each N(mean, stddev^2) from stream = its rank.
std::vector<std::vector<float>> generate_worker_gradients(int workers, size_t elements, uint64_t seed, double mean,
                                                          double stddev);

}  // namespace precsim

// An all-reduce's result against the exact one (`precsim allreduce`).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace precsim {

// Per element, the exact sum over the workers' gradients (rounded once to double), divided by
// `divisor` (1 for a sum, the worker count for an average).
std::vector<double> exact_reduction(std::span<const std::vector<float>> gradients, double divisor);

struct ReductionError {
  double rel_err_norm = 0;   // ||reduced - exact|| / ||exact|| (0 when exact is all zeros)
  double rel_err_max = 0;    // largest |reduced - exact| / |exact| over exact != 0
  double mean_rel_bias = 0;  // mean (reduced - exact) / exact over exact != 0
};
// Sums in element order.
ReductionError reduction_error(std::span<const float> reduced, std::span<const double> exact);

}  // namespace precsim

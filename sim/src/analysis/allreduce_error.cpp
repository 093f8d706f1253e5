#include "precsim/sim/analysis/allreduce_error.h"

#include <algorithm>
#include <cmath>

#include "precsim/sim/accum/exact_dot.h"

namespace precsim {

std::vector<double> exact_reduction(std::span<const std::vector<float>> gradients, double divisor) {
  const size_t n = gradients.empty() ? 0 : gradients.front().size();
  std::vector<double> exact(n);
  for (size_t i = 0; i < n; ++i) {
    LongAccumulator s;
    for (const auto& g : gradients) s.add(g[i]);
    exact[i] = s.to_double() / divisor;
  }
  return exact;
}

ReductionError reduction_error(std::span<const float> reduced, std::span<const double> exact) {
  double num = 0, den = 0, maxrel = 0, bias = 0;
  size_t nb = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double d = reduced[i] - exact[i];
    num += d * d;
    den += exact[i] * exact[i];
    if (exact[i] != 0) {
      maxrel = std::max(maxrel, std::fabs(d / exact[i]));
      bias += d / exact[i];
      ++nb;
    }
  }
  return {den > 0 ? std::sqrt(num / den) : 0.0, maxrel, nb ? bias / nb : 0.0};
}

}  // namespace precsim

// The numbers the runner reports (formulas and denominators in docs/reference/metrics.md). Every sum runs
// sequentially in double in index order, so a metric never depends on the thread count.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/formats/format.h"

namespace precsim {

// ||a - b|| / ||b|| (0 when both are zero, inf when only b is).
double rel_error(std::span<const double> a, std::span<const double> b);
// a.b / (||a|| ||b||); 1 when both are zero, 0 when exactly one is.
double cosine(std::span<const double> a, std::span<const double> b);
double norm2(std::span<const double> a);
// Elements with ref != 0 whose value in a is zero, over elements with ref != 0 (0 when none).
double underflow_vs_reference(std::span<const double> a, std::span<const double> ref);

struct MeanCi {
  double mean = 0;
  double lo = 0, hi = 0;  // 95% interval of the mean (Student's t); lo = hi = mean for one sample
};
// Non-finite samples make the result non-finite.
MeanCi mean_ci95(std::span<const double> samples);

// floor(log2 |x|) -> count over non-zero finite elements, plus the zero and non-finite counts,
// with the window of `f` (exponent of its smallest subnormal and of its largest finite value).
nlohmann::json exponent_histogram(std::span<const double> x, const Format& f);

}  // namespace precsim

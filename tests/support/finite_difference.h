// Central finite differences for gradient checks in FP64.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace precsim::test_support {

// max |analytic - numeric| / max(1e-4, |numeric|) over all coordinates of x, with numeric the
// central difference (f(x + h) - f(x - h)) / 2h; x is restored.
inline double fd_check(std::vector<double>& x, const std::vector<double>& analytic, const std::function<double()>& f,
                       double h = 1e-6) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f();
    x[i] = keep - h;
    const double down = f();
    x[i] = keep;
    const double num = (up - down) / (2 * h);
    worst = std::max(worst, std::fabs(analytic[i] - num) / std::max(1e-4, std::fabs(num)));
  }
  return worst;
}

}  // namespace precsim::test_support

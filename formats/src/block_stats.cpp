// Error statistics of a quantized array against its source, with a fixed summation order.
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/block_scaling.h"

namespace precsim {
namespace {

// Sums are formed per fixed chunk, then the chunk sums in chunk order: the same bits on any
// thread count.
constexpr size_t kChunk = size_t{1} << 16;

struct Partial {
  uint64_t count = 0, nonfinite = 0, nonzero = 0, flushed = 0;
  double signal = 0, noise = 0, max_rel = 0;
};

}  // namespace

ErrorStats error_stats(std::span<const float> x, std::span<const float> q) {
  if (x.size() != q.size())
    throw std::invalid_argument("error_stats: " + std::to_string(x.size()) + " inputs but " +
                                std::to_string(q.size()) + " quantized values");
  const size_t chunks = (x.size() + kChunk - 1) / kChunk;
  std::vector<Partial> parts(chunks);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t k = 0; k < static_cast<int64_t>(chunks); ++k) {
    Partial p;
    const size_t b = k * kChunk, e = std::min(x.size(), b + kChunk);
    for (size_t i = b; i < e; ++i) {
      const double xi = x[i], qi = q[i];
      if (!std::isfinite(xi)) {
        ++p.nonfinite;
        continue;
      }
      ++p.count;
      const double d = xi - qi;  // exact for float inputs unless q is Inf or NaN
      p.signal += xi * xi;
      p.noise += d * d;
      if (xi != 0) {
        ++p.nonzero;
        if (qi == 0) ++p.flushed;
        const double rel = std::fabs(d) / std::fabs(xi);
        p.max_rel = std::isnan(rel) || rel > p.max_rel ? rel : p.max_rel;
      }
    }
    parts[k] = p;
  }
  ErrorStats s;
  for (const auto& p : parts) {
    s.count += p.count;
    s.nonfinite_inputs += p.nonfinite;
    s.nonzero_inputs += p.nonzero;
    s.flushed += p.flushed;
    s.signal_power += p.signal;
    s.noise_power += p.noise;
    s.max_rel_error = std::isnan(p.max_rel) || p.max_rel > s.max_rel_error ? p.max_rel : s.max_rel_error;
  }
  s.mse = s.count ? s.noise_power / static_cast<double>(s.count) : 0.0;
  s.qsnr_db = s.noise_power == 0 ? INFINITY
                                 : 10.0 * std::log10(s.signal_power / s.noise_power);
  return s;
}

double finite_amax(std::span<const float> x, bool* any_nonfinite) {
  float m = 0;
  bool nf = false;
#pragma omp parallel for schedule(static) reduction(max : m) reduction(|| : nf) if (x.size() >= kChunk)
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const float a = std::fabs(x[i]);
    if (a <= FLT_MAX) m = std::max(m, a);
    else nf = true;
  }
  if (any_nonfinite) *any_nonfinite = nf;
  return m;
}

}  // namespace precsim

#include "precsim/sim/core/random.h"

#include <cmath>
#include <numbers>

#include "precsim/formats/sr_bits.h"

namespace precsim {

double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t h = mix64(mix64(mix64(seed ^ 0x9e3779b97f4a7c15ULL) ^ stream) + index * 0xd1b54a32d192ed03ULL);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;
}

double standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = uniform01(seed, stream, 2 * index);
  const double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

template <typename T>
static void fill(std::span<T> out, uint64_t seed, uint64_t stream, double mean, double stddev) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    out[i] = static_cast<T>(mean + stddev * standard_normal(seed, stream, static_cast<uint64_t>(i)));
  }
}

void fill_normal(std::span<float> out, uint64_t seed, uint64_t stream, double mean, double stddev) {
  fill(out, seed, stream, mean, stddev);
}
void fill_normal(std::span<double> out, uint64_t seed, uint64_t stream, double mean, double stddev) {
  fill(out, seed, stream, mean, stddev);
}

}  // namespace precsim

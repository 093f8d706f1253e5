// Deterministic random numbers keyed by (seed, stream, index): element i of a generated array
// depends on nothing else, so results never depend on threads or call order.
#pragma once

#include <cstdint>
#include <span>

namespace precsim {

// Uniform on (0, 1), never 0 or 1: 53-bit mantissa from one keyed hash.
double uniform01(uint64_t seed, uint64_t stream, uint64_t index);
// Standard normal via Box-Muller on two keyed uniforms.
double standard_normal(uint64_t seed, uint64_t stream, uint64_t index);

void fill_normal(std::span<float> out, uint64_t seed, uint64_t stream, double mean = 0, double stddev = 1);
void fill_normal(std::span<double> out, uint64_t seed, uint64_t stream, double mean = 0, double stddev = 1);

}  // namespace precsim

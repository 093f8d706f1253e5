// The random Hadamard transform (RHT) of NVIDIA's NVFP4 recipe (docs/reference/sources.md, "NVFP4 recipe"):
// every run of n consecutive elements along an axis, taken as a row vector x, becomes
// x' = x H with H = (1/sqrt(n)) S H_n, S = diag(signs) a fixed random +-1 vector and H_n the
// (Sylvester) Walsh-Hadamard matrix. H is orthogonal, so transforming both operands of a product
// along its reduction dimension leaves the product unchanged: (A H)(B H)^T = A B^T.
//
// Rounding of the transform itself: the signs and the butterflies of the fast Walsh-Hadamard
// transform are computed in FP64 in the fixed order of the butterfly stages, the result is scaled
// by 1/sqrt(n) (exact for n a power of four) and rounded once to FP32 (nearest-even). For n = 16
// and FP32 inputs within 2^29 of each other every FP64 step is exact, so the only rounding is the
// final one to FP32. The inverse works in FP64 throughout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace precsim {

// n = 2^k with 1 <= k <= 12; throws std::invalid_argument naming n otherwise.
void check_hadamard_size(int n);

// The +-1 signs of the transform (as doubles), element i from the keyed generator of sr_bits.h at
// (seed, index i): the same seed gives the same signs to every layer and step that uses it.
std::vector<double> hadamard_signs(int n, uint64_t seed);

// In place, on a rows x cols row-major array, along `axis` (1: runs of a row, 0: runs down a
// column). The extent along the axis must be a multiple of signs.size(); throws
// std::invalid_argument naming the extent and n otherwise.
void random_hadamard_transform(std::span<float> data, size_t rows, size_t cols, int axis,
                               std::span<const double> signs);
// The same, out of place (out may alias in).
void random_hadamard_transform(std::span<const float> in, std::span<float> out, size_t rows, size_t cols, int axis,
                               std::span<const double> signs);
// The same transform in FP64 without any rounding to FP32 (the tests' exact side).
void random_hadamard_transform(std::span<double> data, size_t rows, size_t cols, int axis,
                               std::span<const double> signs);
// The inverse x = x' H^T = (1/sqrt(n)) x' H_n S, in FP64.
void inverse_random_hadamard_transform(std::span<double> data, size_t rows, size_t cols, int axis,
                                       std::span<const double> signs);

}  // namespace precsim

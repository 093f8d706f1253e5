// The random Hadamard transform: signs, the fast Walsh-Hadamard butterflies in FP64, one rounding.
#include "precsim/formats/hadamard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "hadamard_kernel.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

constexpr size_t kColumnTile = 64;  // vectors transformed side by side (the vectorised inner loop)

// x <- x H_n on n values spaced `stride` doubles apart, `width` vectors side by side (the inner
// loop runs over the vectors, so that it vectorises). kN > 0 fixes n at compile time.
template <int kN>
void butterflies(double* x, int n, size_t stride, size_t width) {
  if constexpr (kN > 0) n = kN;
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        double* p = x + size_t(j) * stride;
        double* q = x + size_t(j + h) * stride;
        for (size_t c = 0; c < width; ++c) {
          const double a = p[c], b = q[c];
          p[c] = a + b;
          q[c] = a - b;
        }
      }
}

// 1/sqrt(n): a power of two when n is a power of four, else the FP64 value of 2^-k/sqrt(2).
double inv_sqrt(int n) {
  const int k = std::countr_zero(static_cast<unsigned>(n));
  return k % 2 == 0 ? std::ldexp(1.0, -k / 2) : std::ldexp(1.0, -(k + 1) / 2) * std::sqrt(2.0);
}

struct Geometry {
  const double* s;
  int n;
  double scale;
};

// A tile: w vectors of n values each, value i of vector t at [i * si + t * st] from the bases.
// Axis 0: a group of n rows and w columns (si = cols, st = 1); axis 1: w consecutive runs of one
// row (si = 1, st = n). The vectors are transformed side by side in buf[n][w]; the tile is read
// whole before it is written, so `out` may alias `in`.
template <int kN, class T, bool kInverse>
void transform_tile(const T* in, T* out, size_t si, size_t st, size_t w, const Geometry& g, double* buf) {
  const int n = kN > 0 ? kN : g.n;
  for (int i = 0; i < n; ++i) {
    const T* src = in + size_t(i) * si;
    double* b = buf + size_t(i) * w;
    const double f = kInverse ? 1.0 : g.s[i];
    for (size_t t = 0; t < w; ++t) b[t] = double(src[t * st]) * f;
  }
  butterflies<kN>(buf, n, w, w);
  for (int i = 0; i < n; ++i) {
    T* dst = out + size_t(i) * si;
    const double* b = buf + size_t(i) * w;
    const double f = kInverse ? g.s[i] : 1.0;
    for (size_t t = 0; t < w; ++t) dst[t * st] = static_cast<T>(b[t] * g.scale * f);
  }
}

template <class T, bool kInverse>
void transform(std::span<const T> in, std::span<T> out, size_t rows, size_t cols, int axis,
               std::span<const double> signs) {
  const int n = static_cast<int>(signs.size());
  check_hadamard_size(n);
  if (in.size() != rows * cols || out.size() != in.size())
    throw std::invalid_argument("random_hadamard_transform: " + std::to_string(in.size()) + " values in, " +
                                std::to_string(out.size()) + " out, for a " + std::to_string(rows) + "x" +
                                std::to_string(cols) + " array");
  const size_t extent = axis == 1 ? cols : rows;
  if (extent % size_t(n) != 0)
    throw std::invalid_argument("random Hadamard transform of size " + std::to_string(n) +
                                " does not divide the reduction dimension " + std::to_string(extent));
  const Geometry g{signs.data(), n, inv_sqrt(n)};
  // Tiles: lines across the axis (row groups for axis 0, rows for axis 1) x tiles of W vectors.
  const size_t lines = axis == 1 ? rows : rows / size_t(n);
  const size_t vectors = axis == 1 ? cols / size_t(n) : cols;
  const size_t tiles_per_line = (vectors + kColumnTile - 1) / kColumnTile;
  const int64_t tiles = static_cast<int64_t>(lines * tiles_per_line);
  const size_t si = axis == 1 ? 1 : cols, st = axis == 1 ? size_t(n) : 1;
  // Every vector is transformed on its own, so any split over threads gives the same bits.
#pragma omp parallel if (in.size() >= (size_t{1} << 16))
  {
    std::vector<double> buf(size_t(n) * kColumnTile);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < tiles; ++k) {
      const size_t line = size_t(k) / tiles_per_line, t0 = (size_t(k) % tiles_per_line) * kColumnTile;
      const size_t w = std::min(kColumnTile, vectors - t0);
      const size_t off = axis == 1 ? line * cols + t0 * size_t(n) : line * size_t(n) * cols + t0;
      const T* src = in.data() + off;
      T* dst = out.data() + off;
      // n = 16 (the recipe's size) with n known to the compiler: the butterflies unroll.
      if constexpr (std::is_same_v<T, float> && !kInverse) {
        if (n == 16 && axis == 1) {
          rht16_runs(src, dst, w, g.s);  // hadamard_kernel.cpp
          continue;
        }
        if (n == 16) {
          rht16_columns(src, dst, cols, w, g.s, nullptr);
          continue;
        }
      }
      if (n == 16) {
        transform_tile<16, T, kInverse>(src, dst, si, st, w, g, buf.data());
      } else {
        transform_tile<0, T, kInverse>(src, dst, si, st, w, g, buf.data());
      }
    }
  }
}

}  // namespace

void check_hadamard_size(int n) {
  if (n < 2 || n > 4096 || (n & (n - 1)) != 0)
    throw std::invalid_argument("Hadamard size " + std::to_string(n) + " is not allowed; allowed: a power of two, 2..4096");
}

std::vector<double> hadamard_signs(int n, uint64_t seed) {
  check_hadamard_size(n);
  const SrKey key{seed, 0, 0x48414441u /* "HADA" */, 0};
  std::vector<double> s(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) s[i] = (sr_bits(key, uint64_t(i)) >> 31) ? -1.0 : 1.0;
  return s;
}

void random_hadamard_transform(std::span<float> data, size_t rows, size_t cols, int axis,
                               std::span<const double> signs) {
  transform<float, false>(std::span<const float>(data), data, rows, cols, axis, signs);
}

void random_hadamard_transform(std::span<const float> in, std::span<float> out, size_t rows, size_t cols, int axis,
                               std::span<const double> signs) {
  transform<float, false>(in, out, rows, cols, axis, signs);
}

void random_hadamard_transform(std::span<double> data, size_t rows, size_t cols, int axis,
                               std::span<const double> signs) {
  transform<double, false>(std::span<const double>(data), data, rows, cols, axis, signs);
}

void inverse_random_hadamard_transform(std::span<double> data, size_t rows, size_t cols, int axis,
                                       std::span<const double> signs) {
  transform<double, true>(std::span<const double>(data), data, rows, cols, axis, signs);
}

}  // namespace precsim

// The random Hadamard transform: signs, the fast Walsh-Hadamard butterflies in FP64, one rounding.
#include "precsim/formats/hadamard.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// The recipe's case (FP32 data, forward, n = 16) compiled for AVX-512, AVX2 and the baseline and
// chosen at run time (GCC function multiversioning): FP64 adds, subtracts and multiplies give the
// same bits at any vector width, and -ffp-contract=off keeps FMA out.
__attribute__((target_clones("avx512f", "avx2", "default")))
void tile16_f32(const float* in, float* out, size_t si, size_t st, size_t w, const Geometry& g, double* buf) {
  transform_tile<16, float, false>(in, out, si, st, w, g, buf);
}

// The recipe's case along rows (FP32 data, forward, n = 16, runs contiguous): each run in two
// 8-lane FP64 registers (one AVX-512 register each; two AVX2 halves elsewhere). Stages h = 1, 2
// and 4 pair lanes of a register: with s the register's lanes swapped by h, lane j becomes
// s + r * (+-1), that is a_j + a_(j+h) or a_j - a_(j+h) exactly as the butterfly's p + q and
// p - q (addition commutes, x * -1 is exact); stage 8 pairs the two registers. The same adds in
// the same stages as butterflies<16>, so the same bits.
typedef double V8d __attribute__((vector_size(64)));
typedef float V8f __attribute__((vector_size(32)));
typedef long long V8i __attribute__((vector_size(64)));

__attribute__((target_clones("avx512f", "avx2", "default")))
void runs16_f32(const float* in, float* out, size_t runs, const double* signs, double scale) {
  V8d sg[2];
  for (int a = 0; a < 2; ++a)
    for (int j = 0; j < 8; ++j) sg[a][j] = signs[8 * a + j];
  const V8d alt1 = {1, -1, 1, -1, 1, -1, 1, -1}, alt2 = {1, 1, -1, -1, 1, 1, -1, -1},
            alt4 = {1, 1, 1, 1, -1, -1, -1, -1};
  const V8d sc = {scale, scale, scale, scale, scale, scale, scale, scale};
  for (size_t r = 0; r < runs; ++r) {
    V8d v[2];
    for (int a = 0; a < 2; ++a) {
      V8f f;
      __builtin_memcpy(&f, in + r * 16 + 8 * a, sizeof f);
      v[a] = __builtin_convertvector(f, V8d) * sg[a];
    }
    for (int a = 0; a < 2; ++a) {
      v[a] = __builtin_shuffle(v[a], V8i{1, 0, 3, 2, 5, 4, 7, 6}) + v[a] * alt1;
      v[a] = __builtin_shuffle(v[a], V8i{2, 3, 0, 1, 6, 7, 4, 5}) + v[a] * alt2;
      v[a] = __builtin_shuffle(v[a], V8i{4, 5, 6, 7, 0, 1, 2, 3}) + v[a] * alt4;
    }
    const V8d p = v[0], q = v[1];
    v[0] = p + q, v[1] = p - q;
    for (int a = 0; a < 2; ++a) {
      const V8f f = __builtin_convertvector(v[a] * sc, V8f);
      __builtin_memcpy(out + r * 16 + 8 * a, &f, sizeof f);
    }
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
      if (n == 16 && axis == 1 && std::is_same_v<T, float> && !kInverse) {
        if constexpr (std::is_same_v<T, float>) runs16_f32(src, dst, w, g.s, g.scale);
      } else if (n == 16) {
        if constexpr (std::is_same_v<T, float> && !kInverse) tile16_f32(src, dst, si, st, w, g, buf.data());
        else transform_tile<16, T, kInverse>(src, dst, si, st, w, g, buf.data());
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

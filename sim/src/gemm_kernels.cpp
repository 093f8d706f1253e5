#include "gemm_kernels.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

namespace precsim::detail {
namespace {

constexpr int64_t kColTile = 256;  // accumulators of one row tile stay in L1

// Copies the K x (j1 - j0) panel of op(B) to a contiguous row-major buffer.
void pack_panel(const KernelArgs& x, int64_t j0, int64_t j1, std::vector<float>& panel) {
  const int64_t w = j1 - j0;
  panel.resize(static_cast<size_t>(x.k * w));
  for (int64_t p = 0; p < x.k; ++p)
    for (int64_t j = 0; j < w; ++j) panel[p * w + j] = x.b[p * x.b_ks + (j0 + j) * x.b_cs];
}

template <class T, bool Fma>
void seq_gemm(const KernelArgs& x, double* acc) {
  const int64_t tiles = (x.n + kColTile - 1) / kColTile;
#pragma omp parallel num_threads(x.threads)
  {
    std::vector<float> panel;
    std::vector<T> row(kColTile);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t j0 = t * kColTile, j1 = std::min(x.n, j0 + kColTile), w = j1 - j0;
      pack_panel(x, j0, j1, panel);
      for (int64_t i = 0; i < x.m; ++i) {
        std::fill(row.begin(), row.end(), T(0));
        const float* ar = x.a + i * x.a_rs;
        for (int64_t p = 0; p < x.k; ++p) {
          const T av = ar[p * x.a_ks];
          const float* bp = panel.data() + p * w;
          for (int64_t j = 0; j < w; ++j) {
            if constexpr (Fma) {
              row[j] = std::fma(av, static_cast<T>(bp[j]), row[j]);
            } else {
              row[j] = row[j] + av * static_cast<T>(bp[j]);
            }
          }
        }
        for (int64_t j = 0; j < w; ++j) acc[i * x.n + j0 + j] = row[j];
      }
    }
  }
}

}  // namespace

void seq_f32_gemm(const KernelArgs& x, bool fma, double* acc) {
  if (fma) seq_gemm<float, true>(x, acc);
  else seq_gemm<float, false>(x, acc);
}

void seq_f64_gemm(const KernelArgs& x, double* acc) { seq_gemm<double, false>(x, acc); }

void eigen_gemm(const KernelArgs& x, double* acc) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const Mat, 0, Stride> a(x.a, x.m, x.k, Stride(x.a_rs, x.a_ks));
  Eigen::Map<const Mat, 0, Stride> b(x.b, x.k, x.n, Stride(x.b_ks, x.b_cs));
  Eigen::setNbThreads(x.threads);
  const Mat c = a * b;
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < x.n; ++j) acc[i * x.n + j] = c(i, j);
}

}  // namespace precsim::detail

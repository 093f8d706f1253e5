#include "gemm_kernels.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

// Run-time dispatch by GCC function multiversioning: each clone computes the same IEEE float
// operations (no contraction: -ffp-contract=off) or the same integer operations, so every target
// gives the same bits; only the vector width differs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PRECSIM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRECSIM_CLONES
#endif

namespace precsim::detail {
namespace {

constexpr int64_t kMr = 4;    // rows per micro-tile
constexpr int64_t kNr = 16;   // columns per micro-tile: accumulators vectorised over N
constexpr int64_t kMb = 64;   // rows per thread task

// op(B) in panels of kNr columns: panel t holds B(p, t*kNr + j) at [t][p][j], zero-padded.
std::vector<float> pack_b(const KernelArgs& x) {
  const int64_t panels = (x.n + kNr - 1) / kNr;
  std::vector<float> pb(static_cast<size_t>(panels * x.k * kNr), 0.0f);
#pragma omp parallel for schedule(static) num_threads(x.threads)
  for (int64_t t = 0; t < panels; ++t)
    for (int64_t p = 0; p < x.k; ++p)
      for (int64_t j = 0; j < kNr && t * kNr + j < x.n; ++j)
        pb[(t * x.k + p) * kNr + j] = x.b[p * x.b_ks + (t * kNr + j) * x.b_cs];
  return pb;
}

// acc[r][j] = sum over p in order of a[p][r] * b[p][j]: each output's K order is sequential.
template <bool Fma>
PRECSIM_CLONES void micro_f32(int64_t k, const float* __restrict a, const float* __restrict b, float* __restrict out) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * kNr;
    for (int64_t r = 0; r < kMr; ++r) {
      const float av = a[p * kMr + r];
      for (int64_t j = 0; j < kNr; ++j) {
        if constexpr (Fma) acc[r][j] = std::fma(av, bp[j], acc[r][j]);
        else acc[r][j] = acc[r][j] + av * bp[j];
      }
    }
  }
  for (int64_t r = 0; r < kMr; ++r)
    for (int64_t j = 0; j < kNr; ++j) out[r * kNr + j] = acc[r][j];
}

template <bool Fma>
void seq_f32(const KernelArgs& x, double* acc) {
  const std::vector<float> pb = pack_b(x);
  const int64_t panels = (x.n + kNr - 1) / kNr;
  const int64_t blocks = (x.m + kMb - 1) / kMb;
#pragma omp parallel num_threads(x.threads)
  {
    std::vector<float> pa(static_cast<size_t>(x.k * kMr));
    float out[kMr * kNr];
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int64_t i0 = blk * kMb; i0 < std::min(x.m, (blk + 1) * kMb); i0 += kMr) {
        // Rows i0..i0+3 of op(A), interleaved by k; missing rows are zero.
        for (int64_t p = 0; p < x.k; ++p)
          for (int64_t r = 0; r < kMr; ++r)
            pa[p * kMr + r] = i0 + r < x.m ? x.a[(i0 + r) * x.a_rs + p * x.a_ks] : 0.0f;
        for (int64_t t = 0; t < panels; ++t) {
          if (Fma) micro_f32<true>(x.k, pa.data(), pb.data() + t * x.k * kNr, out);
          else micro_f32<false>(x.k, pa.data(), pb.data() + t * x.k * kNr, out);
          for (int64_t r = 0; r < kMr && i0 + r < x.m; ++r)
            for (int64_t j = 0; j < kNr && t * kNr + j < x.n; ++j) acc[(i0 + r) * x.n + t * kNr + j] = out[r * kNr + j];
        }
      }
    }
  }
}

}  // namespace

void seq_f32_gemm(const KernelArgs& x, bool fma, double* acc) {
  if (fma) seq_f32<true>(x, acc);
  else seq_f32<false>(x, acc);
}

void seq_f64_gemm(const KernelArgs& x, double* acc) {
#pragma omp parallel for schedule(static) num_threads(x.threads)
  for (int64_t i = 0; i < x.m; ++i) {
    std::vector<double> row(static_cast<size_t>(x.n), 0.0);
    for (int64_t p = 0; p < x.k; ++p) {
      const double av = x.a[i * x.a_rs + p * x.a_ks];
      for (int64_t j = 0; j < x.n; ++j) row[j] = row[j] + av * static_cast<double>(x.b[p * x.b_ks + j * x.b_cs]);
    }
    std::copy(row.begin(), row.end(), acc + i * x.n);
  }
}

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

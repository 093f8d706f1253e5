// Private: the vectorised GEMM kernels behind gemm(). Each output's K order stays sequential;
// vectors run over independent outputs (the N dimension) and threads over output tiles.
#pragma once

#include <cstdint>

namespace precsim::detail {

// op(A)(i, p) = a[i * a_rs + p * a_ks]; op(B)(p, j) = b[p * b_ks + j * b_cs].
struct KernelArgs {
  int64_t m, n, k;
  const float* a;
  int64_t a_rs, a_ks;
  const float* b;
  int64_t b_ks, b_cs;
  int threads;
};

// acc[i * n + j] = sum over p in increasing order of a(i,p) * b(p,j) in FP32, nearest-even,
// product rounded then added (fma: one rounding per step, std::fma).
void seq_f32_gemm(const KernelArgs& x, bool fma, double* acc);
// The same in FP64 (float products are exact in double).
void seq_f64_gemm(const KernelArgs& x, double* acc);
// Eigen's float GEMM: order depends on the CPU and blocking (the unordered model).
void eigen_gemm(const KernelArgs& x, double* acc);

}  // namespace precsim::detail

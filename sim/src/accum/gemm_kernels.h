// Private: the GEMM kernels behind gemm(). Each output's K order is the model's; vectors run over
// independent outputs (the N dimension) and threads over output tiles. The vector micro-kernels
// (gemm_simd_kernel.cpp) are picked at run time among the compiled Highway targets.
#pragma once

#include <cstdint>
#include <string>

namespace precsim {
struct AccumModel;
struct Format;
}  // namespace precsim

namespace precsim::detail {

class AccumEngine;

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
// The block-FMA model on every output, vectorised where block_fma_supported(); false (nothing
// written) where the model's parameters or non-finite operands need the scalar path.
bool block_fma_gemm(const KernelArgs& x, const AccumEngine& eng, const Format& a_fmt, const Format& b_fmt, double* acc);

// --- The dispatched micro-kernels and what the drivers need to know of them. ---
struct TileShape {
  int64_t rows, cols;
};
// Rows and columns of one FP32 micro-tile on the current target.
TileShape seq_f32_tile_shape();
// c[r * ldc + j] for the tile's rows r and columns j continues its FP32 sum over k products of
// a[p * rows + r] and b[p * cols + j] (first: from zero).
void seq_f32_tile(int64_t k, const float* a, const float* b, float* c, int64_t ldc, bool first, bool fma);

// Exponent given to zero operands: far below any alignment floor, so zero products never set E.
inline constexpr double kNoExponent = -1e9;
// The same for the int32 operand exponents of the block-FMA panels: the sum of two stays above
// INT32_MIN, and a zero operand's product stays below kNoExponent.
inline constexpr int32_t kNoExponentI32 = -(1 << 30) + 256;

// The block-FMA parameters a vector lane needs (reference section 2.1).
struct BlockFmaPlan {
  int block_size;               // n
  int promote_every;            // N_C; 0: blocks chain over the whole K
  double frac_bits;             // F
  double floor;                 // alignment-exponent floor
  double acc_emin;              // the accumulator format's emin (subnormal accumulators keep it)
  int drop_bits;                // 52 - output fraction bits
  bool nearest_even;            // final rounding (else toward zero)
  bool int32_sum;               // float-lane kernel: a whole block's int32 terms sum below 2^31
  double min_normal, overflow;  // results outside [min_normal, overflow) go to the scalar path
};
// Per output of one panel: running block result, FP32 outer (promoted) sum, redo flag (0 or 1).
struct BlockState {
  double* d;
  double* outer;
  double* bad;
};
// Outputs per block-FMA row panel on the current target.
int64_t block_fma_width();
// Row (av values, ae exponents: a[p], p < kl) against a packed panel (per p: width values at
// pv + p * width, width exponents at pe + p * width), one K slice starting on a block and
// promotion boundary.
void block_fma_row_panel(const BlockFmaPlan& pl, const double* av, const int32_t* ae, const double* pv,
                         const int32_t* pe, int64_t kl, BlockState state);
// Exponent of zero operands in the float-lane kernel's int16 exponents: the sum of two fits int16.
inline constexpr int16_t kNoExponentI16 = -16384;
// The same in float lanes (values as floats, exponents as int16), for operands that
// block_fma_f32_fits():
// outputs per panel on the current target, 0 where the target has no such kernel.
int64_t block_fma_f32_width();
void block_fma_f32_row_panel(const BlockFmaPlan& pl, const float* av, const int16_t* ae, const float* pv,
                             const int16_t* pe, int64_t kl, BlockState state);
// The Highway target the micro-kernels use now.
std::string gemm_simd_target();

}  // namespace precsim::detail

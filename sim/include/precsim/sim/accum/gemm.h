// Emulated matrix products: C = alpha * op(A) op(B) + beta * C with every product summed over K as
// an AccumModel says. Threads split output elements only; each output's K order is the model's,
// so results are bit-identical on any thread count (except the `unordered` model).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim {

// What gemm() does with operand values that are not values of their declared format.
enum class InputPolicy : uint8_t {
  kCheck,  // throw std::invalid_argument naming the first such element (the default)
  kRound,  // round them (nearest-even; TF32 operands use the model's tf32_rounding)
  kTrust,  // the caller guarantees them; nothing is checked (fastest)
};

// The scales of a block-scaled operand (MX, NVFP4, FP8 per-row, 1x128 tile or 128x128 block
// scaling; formats/block_scaling.h makes them): the operand array holds the element values (values
// of a_format or b_format) and `scale` one decode scale per block. A block covers block_k
// consecutive k and block_mn rows of op(A) (columns of op(B)); the block of row r and k has the
// scale scale[(r / block_mn) * ld + k / block_k]. Both scaled operands need the same block_k.
struct BlockScales {
  const float* scale = nullptr;  // nullptr: the operand is not block-scaled
  int64_t block_k = 0;
  int64_t block_mn = 1;
  int64_t ld = 0;                // 0: ceil(K / block_k)
  float tensor_scale = 1.0f;     // a second level (NVFP4's FP32 tensor decode scale)
};

// Shapes and layout. Matrices are row-major; op(A) is M x K and op(B) is K x N. With trans_a the
// array a holds A^T as a K x M row-major matrix (so dW = X^T dY needs no copy); same for trans_b.
// A leading dimension of 0 means packed.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  Format a_format, b_format;  // fp32 unless set
  InputPolicy input_policy = InputPolicy::kCheck;
  Format out_format;          // format of C; fp32 unless set
  QuantOptions out_options;   // rounding of C
  // Epilogue in FP32 as cuBLAS does: t = fl32(alpha * acc); t = fl32(t + fl32(beta * c)); C =
  // round(t) into out_format. With alpha = 1 and beta = 0 the accumulator is rounded once into C.
  double alpha = 1.0, beta = 0.0;
  int threads = 0;  // 0: OpenMP's default
  // Block scales, applied per group of block_k products as a block-scaled GEMM does (DeepSeek-V3's
  // FP8 GEMM multiplies them in on the CUDA cores; OCP MX sums per-block dot products into FP32):
  // the model sums each group from zero (its blocks and promotion restart there), then
  // acc = fl(acc + fl(fl(scale_a * scale_b) * group_sum)) in FP32 (FP64 for FP64 accumulators),
  // groups in increasing k. Tensor scales multiply alpha, as cuBLAS's scale_A * scale_B.
  BlockScales a_scales, b_scales;
  // Polled on the calling thread between chunks of C's rows (about 2^22 products each) where it is
  // set, A has no block scales and the model is ordered: true stops the product, and gemm returns
  // with GemmStats::stopped and C unwritten (precsim.gemm's Ctrl-C). Outputs do not depend on it.
  std::function<bool()> stop;
  GemmArgs();
};

struct GemmStats {
  uint64_t macs = 0;
  QuantStats inputs;  // roundings of operands (only with InputPolicy::kRound)
  QuantStats output;  // roundings of C into out_format
  uint64_t nan_outputs = 0, inf_outputs = 0;
  bool stopped = false;  // GemmArgs::stop said so: C is unwritten
};

// C (M x N, ldc) as float: values of out_format whenever they fit a float (every format up to FP32).
GemmStats gemm(const AccumModel& model, const GemmArgs& args, const float* a, const float* b, float* c);
// The same with a double output (out_format may be fp64).
GemmStats gemm(const AccumModel& model, const GemmArgs& args, const float* a, const float* b, double* c);

// The FP64 reference model: sequential FP64 sums in increasing k (fma: std::fma at each step),
// alpha and beta applied in FP64. Same layout rules as GemmArgs (formats and policy are ignored).
void gemm_f64(const GemmArgs& args, const double* a, const double* b, double* c, bool fma = false);

// One dot product as the model sums it: c + sum_i a[i] * b[i], with a, b values of a_fmt, b_fmt
// and c a value of the model's accumulator format. split-K slices combined in the output format
// use out_fmt (nullptr: the accumulator format). Returns the result as a double (exact: every
// accumulator format fits a double); status or-s the Status bits of every rounding.
double accum_dot(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                 const Format& a_fmt, const Format& b_fmt, uint32_t* status = nullptr,
                 const Format* out_fmt = nullptr);

// The Highway target of gemm()'s vector kernels now (force_quantize_simd_target changes it).
std::string gemm_simd_target();

// Bytes gemm() and the CLI would allocate for operands and outputs of this shape (float A, B, C
// plus the exact reference sample); used to refuse shapes that do not fit before allocating.
uint64_t gemm_bytes_estimate(int64_t m, int64_t n, int64_t k);

}  // namespace precsim

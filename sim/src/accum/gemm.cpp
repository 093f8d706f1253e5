#include "precsim/sim/accum/gemm.h"

#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "accum_engine.h"
#include "gemm_kernels.h"
#include "in_instruction_gemm.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

using detail::fp32_format;
using detail::fp64_format;

struct Layout {
  int64_t lda, ldb, ldc;
  int64_t a_rows, a_cols, b_rows, b_cols;  // stored shapes
};

Layout resolve_layout(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0)
    throw std::invalid_argument(fmt::format("gemm: negative shape m={} n={} k={}", g.m, g.n, g.k));
  Layout l;
  l.a_rows = g.trans_a ? g.k : g.m;
  l.a_cols = g.trans_a ? g.m : g.k;
  l.b_rows = g.trans_b ? g.n : g.k;
  l.b_cols = g.trans_b ? g.k : g.n;
  l.lda = g.lda ? g.lda : l.a_cols;
  l.ldb = g.ldb ? g.ldb : l.b_cols;
  l.ldc = g.ldc ? g.ldc : g.n;
  if (l.lda < l.a_cols || l.ldb < l.b_cols || l.ldc < g.n)
    throw std::invalid_argument(fmt::format("gemm: leading dimensions lda={} ldb={} ldc={} smaller than the rows "
                                            "they hold ({}, {}, {})", l.lda, l.ldb, l.ldc, l.a_cols, l.b_cols, g.n));
  return l;
}

// Operands as values of their formats: checked, rounded, or trusted. Returns the pointer to use
// (the caller's array, or `store` holding a rounded packed copy with ld = cols).
const float* prepare_operand(const char* name, const float* x, int64_t rows, int64_t cols, int64_t& ld,
                             const Format& f, const AccumModel& model, InputPolicy policy,
                             std::vector<float>& store, QuantStats& stats) {
  if (policy == InputPolicy::kTrust || rows * cols == 0 || f == fp32_format()) return x;
  QuantOptions o;
  if (is_tf32(f)) o.rounding = model.tf32_rounding;
  store.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x + r * ld, x + r * ld + cols, store.begin() + r * cols);
  QuantStats st;
  quantize(f, std::span<const float>(store), std::span<float>(store), o, &st);
  if (policy == InputPolicy::kCheck) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float v = x[r * ld + c], q = store[r * cols + c];
        if (!(v == q || (std::isnan(v) && std::isnan(q))) || std::signbit(v) != std::signbit(q))
          throw std::invalid_argument(fmt::format("gemm: operand {}[{}][{}] = {} ({:a}) is not a value of {}", name, r,
                                                  c, v, v, f.name));
      }
    }
    store.clear();
    return x;
  }
  stats += st;
  ld = cols;
  return store.data();
}

float to_f32(double x) { return static_cast<float>(x); }

// acc (m x n) = every output's sum over x's K as the model says.
void accumulate(const AccumModel& model, const detail::AccumEngine& eng, const detail::KernelArgs& ka, double* acc) {
  if (model.kind == AccumKind::kUnordered) {
    detail::eigen_gemm(ka, acc);
  } else if (eng.native_f32() && model.split_k == 1) {
    detail::seq_f32_gemm(ka, model.fma, acc);
  } else if (eng.native_f64() && model.split_k == 1) {
    detail::seq_f64_gemm(ka, acc);
  } else if (!detail::block_fma_gemm(ka, eng, eng.a_format(), eng.b_format(), acc)) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(ka.threads)
    for (int64_t i = 0; i < ka.m; ++i) {
      uint32_t st = 0;
      for (int64_t j = 0; j < ka.n; ++j) {
        const detail::DotOperands x{ka.a + i * ka.a_rs, ka.a_ks, ka.b + j * ka.b_cs, ka.b_ks, ka.k};
        acc[i * ka.n + j] = eng.dot(x, 0.0, st);
      }
    }
  }
}

struct ScaleGroups {
  int64_t size;                // k per group
  int64_t count;               // groups along K
  int64_t a_ld, b_ld;          // scales per row of blocks
};

void check_scales(const char* name, const BlockScales& s, int64_t k) {
  if (!s.scale) return;
  if (s.block_k < 1 || s.block_mn < 1)
    throw std::invalid_argument(fmt::format("gemm: {} scale blocks of {} x {} (rows x k); both must be >= 1", name,
                                            s.block_mn, s.block_k));
  const int64_t groups = (k + s.block_k - 1) / s.block_k;
  if (s.ld != 0 && s.ld < groups)
    throw std::invalid_argument(fmt::format("gemm: {} scales ld={} is smaller than the {} blocks along K={}", name,
                                            s.ld, groups, k));
}

ScaleGroups scale_groups(const GemmArgs& g) {
  const BlockScales &sa = g.a_scales, &sb = g.b_scales;
  check_scales("A", sa, g.k);
  check_scales("B", sb, g.k);
  if (sa.scale && sb.scale && sa.block_k != sb.block_k)
    throw std::invalid_argument(fmt::format("gemm: A's scale blocks run over {} k but B's over {}; the group sums need "
                                            "one block length along K", sa.block_k, sb.block_k));
  ScaleGroups sg;
  sg.size = sa.scale ? sa.block_k : sb.block_k;
  sg.count = (g.k + sg.size - 1) / sg.size;
  sg.a_ld = sa.ld ? sa.ld : sg.count;
  sg.b_ld = sb.ld ? sb.ld : sg.count;
  return sg;
}

// Block-scaled operands: each group of K is summed by the model from zero, then its sum times
// the group's scale product is added to the accumulator on the "CUDA cores", in T (FP32, or FP64
// where the model accumulates in FP64): acc = T(acc + T(T(sa * sb) * group_sum)), groups in
// increasing k.
template <class T>
void accumulate_scaled(const AccumModel& model, const detail::AccumEngine& eng, const detail::KernelArgs& ka,
                       const ScaleGroups& sg, const GemmArgs& g, double* acc) {
  std::vector<T> total(static_cast<size_t>(ka.m * ka.n), T(0));
  std::vector<double> part(total.size());
  for (int64_t q = 0; q < sg.count; ++q) {
    detail::KernelArgs kq = ka;
    kq.a = ka.a + q * sg.size * ka.a_ks;
    kq.b = ka.b + q * sg.size * ka.b_ks;
    kq.k = std::min(sg.size, ka.k - q * sg.size);
    accumulate(model, eng, kq, part.data());
#pragma omp parallel for schedule(static) num_threads(ka.threads)
    for (int64_t i = 0; i < ka.m; ++i) {
      const T sa = g.a_scales.scale ? T(g.a_scales.scale[(i / g.a_scales.block_mn) * sg.a_ld + q]) : T(1);
      for (int64_t j = 0; j < ka.n; ++j) {
        const T sb = g.b_scales.scale ? T(g.b_scales.scale[(j / g.b_scales.block_mn) * sg.b_ld + q]) : T(1);
        const T s = sa * sb;
        const T p = s * static_cast<T>(part[i * ka.n + j]);
        total[i * ka.n + j] = total[i * ka.n + j] + p;
      }
    }
  }
  std::copy(total.begin(), total.end(), acc);
}

// One row of accumulators stored into C, NaN and infinite values counted on their bits: the
// integer compares vectorise where the floating-point ones did not. The conversion to float is the
// scalar one in every lane (nearest-even); a NaN becomes the format's NaN, positive and quiet, as
// the epilogue's rounding into C makes it (x86's inf - inf is negative: float and double C of one
// product, precsim.gemm's and precsim gemm's, differed in the sign).
template <class Out>
[[gnu::always_inline]] inline void store_row(const double* acc, Out* c, int64_t n, uint64_t& nans, uint64_t& infs) {
  constexpr uint64_t kInf = 0x7ff0000000000000u;
  uint64_t nn = 0, ni = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double v = acc[j];
    const uint64_t mag = std::bit_cast<uint64_t>(v) & ~(uint64_t{1} << 63);
    nn += mag > kInf;
    ni += mag == kInf;
    c[j] = mag > kInf ? std::numeric_limits<Out>::quiet_NaN() : static_cast<Out>(v);
  }
  nans += nn;
  infs += ni;
}

// Compiled for x86-64-v4 (AVX-512), v3 (AVX2) and the baseline, chosen at run time (GCC function
// multiversioning); the same bits on each.
#define PRECSIM_STORE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
PRECSIM_STORE_CLONES void store_row_native(const double* acc, float* c, int64_t n, uint64_t& nans, uint64_t& infs) {
  store_row(acc, c, n, nans, infs);
}
PRECSIM_STORE_CLONES void store_row_native(const double* acc, double* c, int64_t n, uint64_t& nans, uint64_t& infs) {
  store_row(acc, c, n, nans, infs);
}
#undef PRECSIM_STORE_CLONES

// The epilogue without alpha, beta or a rounding: C is the accumulator (its format is C's), and
// the statistics count the outputs and NaN results as the general epilogue does.
template <class Out>
QuantStats store_native(const double* acc, int64_t m, int64_t n, Out* c, int64_t ldc, int threads, uint64_t& nan_out,
                        uint64_t& inf_out) {
  uint64_t nans = 0, infs = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : nans, infs)
  for (int64_t i = 0; i < m; ++i) store_row_native(acc + i * n, c + i * ldc, n, nans, infs);
  QuantStats st;
  st.count = static_cast<uint64_t>(m * n);
  st.nan = nans;
  nan_out = nans;
  inf_out = infs;
  return st;
}

// Every accumulator (block scales applied, inside the instruction or per block sum), and the alpha
// the epilogue applies (alpha times the tensor scales, in the compute format).
double accumulate_all(const AccumModel& model, const detail::AccumEngine& eng, const detail::KernelArgs& ka,
                      const GemmArgs& g, bool f64_acc, double alpha, double* acc) {
  const bool in_instruction = model.kind == AccumKind::kBlockFma && model.block.in_instruction_scales;
  if (!in_instruction && !g.a_scales.scale && !g.b_scales.scale) {
    accumulate(model, eng, ka, acc);
    return alpha;
  }
  if (in_instruction) {
    detail::in_instruction_scaled_gemm(eng, ka, g.a_scales, g.b_scales, acc);
  } else {
    const ScaleGroups sg = scale_groups(g);
    if (f64_acc) accumulate_scaled<double>(model, eng, ka, sg, g, acc);
    else accumulate_scaled<float>(model, eng, ka, sg, g, acc);
  }
  const double t = f64_acc ? double(g.a_scales.tensor_scale) * g.b_scales.tensor_scale
                           : to_f32(double(g.a_scales.tensor_scale) * g.b_scales.tensor_scale);
  return f64_acc ? alpha * t : to_f32(alpha * t);
}

// Products per chunk of rows between two polls of GemmArgs::stop: a few milliseconds of the
// slowest emulated models on one core, so that a stop is seen well within a second.
constexpr int64_t kStopChunkMacs = int64_t{1} << 22;

// accumulate_all over chunks of C's rows, polling g.stop between them; stopped says it ended the
// product early. Each output depends on its row and column only, so the chunks change no bit.
double accumulate_in_chunks(const AccumModel& model, const detail::AccumEngine& eng, const detail::KernelArgs& ka,
                            const GemmArgs& g, bool f64_acc, double alpha, double* acc, bool& stopped) {
  const int64_t per_row = std::max<int64_t>(1, g.n * g.k);
  const int64_t rows = std::max<int64_t>(int64_t{4} * ka.threads, kStopChunkMacs / per_row);
  double scaled_alpha = alpha;
  for (int64_t r0 = 0; r0 < g.m; r0 += rows) {
    detail::KernelArgs kr = ka;
    kr.m = std::min(rows, g.m - r0);
    kr.a = ka.a + r0 * ka.a_rs;
    GemmArgs gr = g;
    gr.m = kr.m;
    scaled_alpha = accumulate_all(model, eng, kr, gr, f64_acc, alpha, acc + r0 * g.n);
    if (r0 + rows < g.m && g.stop()) {
      stopped = true;
      break;
    }
  }
  return scaled_alpha;
}

// Epilogue: alpha, beta*C in the compute format, then one rounding into the output format (none
// where the output is the native accumulator format).
template <class Out>
void epilogue(const GemmArgs& g, int64_t ldc, const double* acc, double alpha, double beta, const Format& compute,
              bool out_native, int threads, Out* c, GemmStats& stats) {
  QuantOptions co;  // the epilogue's compute-format arithmetic: nearest-even
  QuantStats out_stats;
  uint64_t nans = 0, infs = 0;
#pragma omp parallel num_threads(threads) reduction(+ : nans, infs)
  {
    QuantStats local;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        uint32_t st = 0;
        double t = acc[i * g.n + j];
        if (alpha != 1.0) t = detail::round_value(compute, co, alpha * t, st);
        Out& dst = c[i * ldc + j];
        if (beta != 0.0) {
          const double bc = detail::round_value(compute, co, beta * static_cast<double>(dst), st);
          t = detail::round_sum(compute, co, t, bc, st);
        }
        double v;
        uint32_t s = 0;
        if (out_native) {
          v = t;
          if (std::isnan(v)) s |= kNanResult;
        } else {
          v = round_to(g.out_format, t, g.out_options, &s, static_cast<uint64_t>(i * g.n + j));
        }
        local.add(s);
        nans += std::isnan(v);
        infs += std::isinf(v);
        dst = static_cast<Out>(v);
      }
    }
#pragma omp critical
    out_stats += local;
  }
  stats.output = out_stats;
  stats.nan_outputs = nans;
  stats.inf_outputs = infs;
}

template <class Out>
GemmStats run_gemm(const AccumModel& model, const GemmArgs& g, const float* a, const float* b, Out* c) {
  Layout l = resolve_layout(g);
  GemmStats stats;
  stats.macs = static_cast<uint64_t>(g.m) * g.n * g.k;
  std::vector<float> sa, sb;
  a = prepare_operand("A", a, l.a_rows, l.a_cols, l.lda, g.a_format, model, g.input_policy, sa, stats.inputs);
  b = prepare_operand("B", b, l.b_rows, l.b_cols, l.ldb, g.b_format, model, g.input_policy, sb, stats.inputs);
  if (g.m == 0 || g.n == 0) return stats;

  const detail::AccumEngine eng(model.kind == AccumKind::kUnordered ? AccumModel() : model, g.a_format,
                                g.b_format, g.out_format);
  const bool f64_acc = eng.native_f64();
  const Format& compute = f64_acc ? fp64_format() : fp32_format();
  const double alpha = f64_acc ? g.alpha : to_f32(g.alpha);
  const double beta = f64_acc ? g.beta : to_f32(g.beta);
  const bool out_native32 = std::is_same_v<Out, float> && g.out_format == fp32_format() && g.out_options == QuantOptions();
  const bool out_native64 = std::is_same_v<Out, double> && g.out_format == fp64_format() && g.out_options == QuantOptions();

  // Accumulators for all outputs first (double holds every accumulator format exactly).
  // Every path writes every accumulator, so none is zeroed first.
  const auto acc = std::make_unique_for_overwrite<double[]>(static_cast<size_t>(g.m * g.n));
  const int threads = g.threads > 0 ? g.threads : omp_get_max_threads();
  const detail::KernelArgs ka{g.m, g.n, g.k, a, g.trans_a ? 1 : l.lda, g.trans_a ? l.lda : 1,
                              b, g.trans_b ? 1 : l.ldb, g.trans_b ? l.ldb : 1, threads};
  // A stop hook splits the rows (not under A's block scales, whose row blocks and error messages
  // count from row 0, nor for the unordered model, whose Eigen blocking follows the shape).
  const bool chunked = g.stop && !g.a_scales.scale && model.kind != AccumKind::kUnordered;
  const double scaled_alpha = chunked
                                  ? accumulate_in_chunks(model, eng, ka, g, f64_acc, alpha, acc.get(), stats.stopped)
                                  : accumulate_all(model, eng, ka, g, f64_acc, alpha, acc.get());
  if (stats.stopped) return stats;
  if ((out_native32 || out_native64) && scaled_alpha == 1.0 && beta == 0.0) {
    stats.output = store_native(acc.get(), g.m, g.n, c, l.ldc, threads, stats.nan_outputs, stats.inf_outputs);
    return stats;
  }
  epilogue(g, l.ldc, acc.get(), scaled_alpha, beta, compute, out_native32 || out_native64, threads, c, stats);
  return stats;
}

}  // namespace

GemmArgs::GemmArgs() : a_format(fp32_format()), b_format(fp32_format()), out_format(fp32_format()) {}

GemmStats gemm(const AccumModel& model, const GemmArgs& args, const float* a, const float* b, float* c) {
  if (args.out_format.bits() > 32 || args.out_format.emax() > 127)
    throw std::invalid_argument("gemm: output format '" + args.out_format.name + "' does not fit a float; use the double output");
  return run_gemm(for_operands(model, args.a_format, args.b_format), args, a, b, c);
}

GemmStats gemm(const AccumModel& model, const GemmArgs& args, const float* a, const float* b, double* c) {
  return run_gemm(for_operands(model, args.a_format, args.b_format), args, a, b, c);
}

void gemm_f64(const GemmArgs& g, const double* a, const double* b, double* c, bool fma) {
  const Layout l = resolve_layout(g);
  const int threads = g.threads > 0 ? g.threads : omp_get_max_threads();
  const int64_t a_rs = g.trans_a ? 1 : l.lda, a_ks = g.trans_a ? l.lda : 1;
  const int64_t b_ks = g.trans_b ? 1 : l.ldb, b_cs = g.trans_b ? l.ldb : 1;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      const double* ar = a + i * a_rs;
      const double* bc = b + j * b_cs;
      if (fma) {
        for (int64_t p = 0; p < g.k; ++p) s = std::fma(ar[p * a_ks], bc[p * b_ks], s);
      } else {
        for (int64_t p = 0; p < g.k; ++p) s = s + ar[p * a_ks] * bc[p * b_ks];
      }
      double& dst = c[i * l.ldc + j];
      const double t = g.alpha * s;
      dst = g.beta != 0.0 ? t + g.beta * dst : t;
    }
  }
}

std::string gemm_simd_target() { return detail::gemm_simd_target(); }

uint64_t gemm_bytes_estimate(int64_t m, int64_t n, int64_t k) {
  const long double b = 4.0L * (static_cast<long double>(m) * k + static_cast<long double>(k) * n) +
                        16.0L * static_cast<long double>(m) * n;
  return b > 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(b);
}

}  // namespace precsim

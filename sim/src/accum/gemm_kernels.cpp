// The drivers of the GEMM kernels: packing, cache blocking and threads (OpenMP over output tiles);
// the vector micro-kernels they call are in gemm_simd_kernel.cpp.
#include "gemm_kernels.h"

#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "accum_engine.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim::detail {
namespace {

// K per slice of the FP32 kernels: 512 makes half the passes over C that 256 did, and the packed
// B micro-panel streams from L2 fast enough (2048^3: 0.86-0.92x the time of 256; 128 was slower).
constexpr int64_t kKc = 512;
constexpr int64_t kBlockKc = 256;  // K per block-FMA slice
constexpr int64_t kMc = 64;   // rows per thread task

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One packed micro-panel: dst[p * w + j] = src[p * ps + j * js] for j < valid, 0 for valid <= j < w,
// p < kl. The loop whose source stride is 1 runs innermost, so the source is read in order whether
// the operand is stored along K or across it.
void pack_panel(float* dst, const float* src, int64_t kl, int64_t w, int64_t valid, int64_t ps, int64_t js) {
  if (js == 1) {
    for (int64_t p = 0; p < kl; ++p) {
      std::copy_n(src + p * ps, valid, dst + p * w);
      std::fill(dst + p * w + valid, dst + (p + 1) * w, 0.0f);
    }
    return;
  }
  for (int64_t j = 0; j < valid; ++j) {
    const float* s = src + j * js;
    for (int64_t p = 0; p < kl; ++p) dst[p * w + j] = s[p * ps];
  }
  for (int64_t j = valid; j < w; ++j)
    for (int64_t p = 0; p < kl; ++p) dst[p * w + j] = 0.0f;
}

}  // namespace

// Cutting K into slices keeps every output's order: each slice continues the float sums where the
// last one stopped.
void seq_f32_gemm(const KernelArgs& x, bool fma, double* acc) {
  if (x.k == 0) {
    std::fill(acc, acc + x.m * x.n, 0.0);
    return;
  }
  const TileShape ts = seq_f32_tile_shape();
  const int64_t mr = ts.rows, nr = ts.cols;
  const int64_t panels = ceil_div(x.n, nr), ldc = panels * nr;
  const int64_t row_blocks = ceil_div(x.m, kMc);
  const int64_t kc = std::min(kKc, x.k);
  auto c = hwy::AllocateAligned<float>(static_cast<size_t>(ceil_div(x.m, mr) * mr * ldc));
  auto pb = hwy::AllocateAligned<float>(static_cast<size_t>(panels * kc * nr));
#pragma omp parallel num_threads(x.threads)
  {
    auto pa = hwy::AllocateAligned<float>(static_cast<size_t>(ceil_div(kMc, mr) * mr * kc));
    for (int64_t pc = 0; pc < x.k; pc += kc) {
      const int64_t kl = std::min(kc, x.k - pc);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < panels; ++t)
        pack_panel(pb.get() + t * kc * nr, x.b + pc * x.b_ks + t * nr * x.b_cs, kl, nr, std::min(nr, x.n - t * nr),
                   x.b_ks, x.b_cs);
#pragma omp for schedule(dynamic, 1)
      for (int64_t blk = 0; blk < row_blocks; ++blk) {
        const int64_t i0 = blk * kMc, tiles = ceil_div(std::min(x.m, i0 + kMc) - i0, mr);
        for (int64_t q = 0; q < tiles; ++q) {
          const int64_t i = i0 + q * mr;
          pack_panel(pa.get() + q * kc * mr, x.a + i * x.a_rs + pc * x.a_ks, kl, mr, std::min(mr, x.m - i), x.a_ks,
                     x.a_rs);
        }
        for (int64_t t = 0; t < panels; ++t)
          for (int64_t q = 0; q < tiles; ++q)
            seq_f32_tile(kl, pa.get() + q * kc * mr, pb.get() + t * kc * nr, c.get() + (i0 + q * mr) * ldc + t * nr,
                         ldc, pc == 0, fma);
      }
    }
  }
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < x.n; ++j) acc[i * x.n + j] = c[i * ldc + j];
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

namespace {

// The block model's input decomposition (reference section 2.1 step 1) of one operand value:
// the value itself and the exponent of its binade, clamped to the format's emin; zero, and
// subnormals where the model flushes them, give (0, kNoExponentI32).
void decompose(float x, const Format& f, bool subnormals, double& v, int32_t& e) {
  int fl = x == 0 ? 0 : std::ilogb(x);
  if (x != 0 && fl < f.emin() && subnormals) fl = f.emin();
  if (x == 0 || fl < f.emin()) {
    v = 0;
    e = kNoExponentI32;
    return;
  }
  v = x;
  e = fl;
}

bool all_finite(const float* x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(x[r * rs + c * cs])) return false;
  return true;
}

// Whether the vector lanes compute this model exactly (see gemm_simd_kernel.cpp).
bool block_vectorisable(const AccumModel& m) {
  const BlockFmaParams& b = m.block;
  const Format& f = m.acc;
  return m.kind == AccumKind::kBlockFma && m.split_k == 1 && !b.normalize_products &&
         (m.promote_every == 0 || m.promote_rounding == Rounding::kNearestEven) &&
         b.frac_bits + 2 + std::bit_width(static_cast<unsigned>(b.block_size + 1)) <= 53 &&
         f.kind == FormatKind::kFloat && f.nonfinite == NonFinite::kIeee && f.is_signed && f.has_zero &&
         f.emin() >= -126 && f.emax() <= 127;
}

}  // namespace

bool block_fma_gemm(const KernelArgs& x, const AccumEngine& eng, const Format& a_fmt, const Format& b_fmt,
                    double* acc) {
  const AccumModel& m = eng.model();
  if (!block_vectorisable(m) || !all_finite(x.a, x.m, x.k, x.a_rs, x.a_ks) ||
      !all_finite(x.b, x.k, x.n, x.b_ks, x.b_cs))
    return false;
  const BlockFmaParams& bp = m.block;
  BlockFmaPlan pl{};
  pl.block_size = bp.block_size;
  pl.promote_every = m.promote_every;
  pl.frac_bits = bp.frac_bits;
  pl.floor = bp.align_exp_floor;
  pl.acc_emin = m.acc.emin();
  pl.drop_bits = 52 - bp.out_frac_bits;
  pl.nearest_even = bp.final_rounding == Rounding::kNearestEven;
  pl.min_normal = std::ldexp(1.0, m.acc.emin());
  pl.overflow = std::ldexp(1.0, m.acc.emax() + 1);

  const int64_t w = block_fma_width(), panels = ceil_div(x.n, w), ldw = panels * w;
  const int64_t period = m.promote_every > 0 ? m.promote_every : bp.block_size;
  const int64_t kc = std::min(x.k, period * ceil_div(kBlockKc, period));
  const size_t outputs = static_cast<size_t>(x.m * ldw);
  auto d = hwy::AllocateAligned<double>(outputs), outer = hwy::AllocateAligned<double>(outputs),
       bad = hwy::AllocateAligned<double>(outputs);
  std::fill(d.get(), d.get() + outputs, 0.0);
  std::fill(outer.get(), outer.get() + outputs, 0.0);
  std::fill(bad.get(), bad.get() + outputs, 0.0);
  const size_t panel_size = static_cast<size_t>(std::max<int64_t>(1, panels * kc * w));
  auto pb = hwy::AllocateAligned<double>(panel_size);
  auto pbe = hwy::AllocateAligned<int32_t>(panel_size);
  const int64_t row_blocks = ceil_div(x.m, kMc);
#pragma omp parallel num_threads(x.threads)
  {
    std::vector<double> av(static_cast<size_t>(kMc * kc));
    std::vector<int32_t> ae(av.size());
    for (int64_t pc = 0; pc < x.k; pc += kc) {
      const int64_t kl = std::min(kc, x.k - pc);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < panels; ++t)
        for (int64_t p = 0; p < kl; ++p)
          for (int64_t j = 0; j < w; ++j) {
            const size_t o = static_cast<size_t>((t * kc + p) * w + j);
            const int64_t col = t * w + j;
            if (col < x.n) decompose(x.b[(pc + p) * x.b_ks + col * x.b_cs], b_fmt, bp.in_subnormals, pb[o], pbe[o]);
            else pb[o] = 0, pbe[o] = kNoExponentI32;
          }
#pragma omp for schedule(dynamic, 1)
      for (int64_t blk = 0; blk < row_blocks; ++blk) {
        const int64_t i0 = blk * kMc, rows = std::min(x.m, i0 + kMc) - i0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t p = 0; p < kl; ++p)
            decompose(x.a[(i0 + r) * x.a_rs + (pc + p) * x.a_ks], a_fmt, bp.in_subnormals, av[r * kc + p],
                      ae[r * kc + p]);
        for (int64_t t = 0; t < panels; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            const size_t o = static_cast<size_t>((i0 + r) * ldw + t * w);
            block_fma_row_panel(pl, av.data() + r * kc, ae.data() + r * kc, pb.get() + t * kc * w, pbe.get() + t * kc * w,
                                kl, {d.get() + o, outer.get() + o, bad.get() + o});
          }
      }
    }
    // Lanes whose block results left the normal range of the output format: the scalar path.
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < x.m; ++i) {
      for (int64_t j = 0; j < x.n; ++j) {
        const size_t o = static_cast<size_t>(i * ldw + j);
        if (bad[o] != 0) {
          uint32_t st = 0;
          acc[i * x.n + j] = eng.dot({x.a + i * x.a_rs, x.a_ks, x.b + j * x.b_cs, x.b_ks, x.k}, 0.0, st);
        } else {
          acc[i * x.n + j] = m.promote_every > 0 ? outer[o] : d[o];
        }
      }
    }
  }
  return true;
}

}  // namespace precsim::detail

// The drivers of the GEMM kernels: packing, cache blocking and threads (OpenMP over output tiles);
// the vector micro-kernels they call are in gemm_simd_kernel.cpp.
#include "gemm_kernels.h"

#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "accum_engine.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim::detail {
namespace {

// K per slice of the FP32 kernels: 512 makes half the passes over C that 256 did, and the packed
// B micro-panel streams from L2 fast enough (2048^3: 0.86-0.92x the time of 256; 128 was slower).
constexpr int64_t kKc = 512;
constexpr int64_t kBlockKc = 256;  // K per block-FMA slice
constexpr int64_t kMc = 64;        // rows per thread task

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
    // The copy out is the first touch of acc's pages: shared by the threads.
#pragma omp for schedule(static)
    for (int64_t i = 0; i < x.m; ++i)
      for (int64_t j = 0; j < x.n; ++j) acc[i * x.n + j] = c[i * ldc + j];
  }
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
// subnormals where the model flushes them, give (0, no_exponent<X>).
template <class X>
constexpr X no_exponent() {
  return static_cast<X>(std::is_same_v<X, int16_t> ? int32_t{kNoExponentI16} : kNoExponentI32);
}

template <class T, class X>
void decompose(float x, const Format& f, bool subnormals, T& v, X& e) {
  const int field = static_cast<int>((std::bit_cast<uint32_t>(x) >> 23) & 0xffu);  // x is finite
  int fl = x == 0 ? 0 : field != 0 ? field - 127 : std::ilogb(x);
  if (x != 0 && fl < f.emin() && subnormals) fl = f.emin();
  if (x == 0 || fl < f.emin()) {
    v = 0;
    e = no_exponent<X>();
    return;
  }
  v = x;
  e = static_cast<X>(fl);
}

// One operand's values: all finite, and the float exponent fields of the non-zero ones (float
// subnormals count as field 0, below every normal exponent).
struct OperandScan {
  bool finite = true;
  int lo = 255, hi = 0;  // smallest and largest field; lo > hi: no non-zero value
};

OperandScan scan(const float* x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rs < cs) std::swap(rows, cols), std::swap(rs, cs);  // the unit stride innermost
  OperandScan o;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t lo = 255, hi = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[r * rs + c * cs]) & 0x7fffffffu, field = bits >> 23;
      lo = std::min(lo, bits != 0 ? field : 255u);
      hi = std::max(hi, field);
    }
    o.lo = std::min(o.lo, static_cast<int>(lo));
    o.hi = std::max(o.hi, static_cast<int>(hi));
  }
  o.finite = o.hi < 255;
  return o;
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

// Whether the float-lane kernel's conditions hold (gemm_simd_kernel.cpp): products of the two
// formats' significands fit a float's 24 bits; every non-zero product a*b is a normal float
// (2^(lo_a + lo_b) >= 2^-126 and 2^(hi_a + hi_b + 2) <= 2^127, hi taken at the clamped exponent
// the model uses); every E that a non-zero product sets leaves 2^(F-E) a normal float; the
// aligned terms (below 2^(F+2)) of half a block sum below 2^31.
bool block_fma_f32_fits(const AccumModel& m, const Format& a_fmt, const Format& b_fmt, const OperandScan& a,
                        const OperandScan& b) {
  const int64_t f = m.block.frac_bits, half = (m.block.block_size + 1) / 2;
  if (block_fma_f32_width() == 0 || a_fmt.man_bits + b_fmt.man_bits + 2 > 24 || f > 28 ||
      m.block.align_exp_floor < -8192 || ((int64_t{1} << (f + 2)) - 1) * half > INT32_MAX)
    return false;
  if (a.lo > a.hi || b.lo > b.hi) return true;  // every product is zero
  const int lo = a.lo + b.lo - 254, hi = std::max(a.hi - 127, a_fmt.emin()) + std::max(b.hi - 127, b_fmt.emin());
  return lo >= std::max<int64_t>(-126, f - 127) && hi <= 125;
}

BlockFmaPlan make_plan(const AccumModel& m) {
  const BlockFmaParams& bp = m.block;
  BlockFmaPlan pl{};
  pl.block_size = bp.block_size;
  pl.promote_every = m.promote_every;
  pl.frac_bits = bp.frac_bits;
  pl.floor = bp.align_exp_floor;
  pl.acc_emin = m.acc.emin();
  pl.drop_bits = 52 - bp.out_frac_bits;
  pl.nearest_even = bp.final_rounding == Rounding::kNearestEven;
  pl.int32_sum = bp.frac_bits <= 28 && ((int64_t{1} << (bp.frac_bits + 2)) - 1) * bp.block_size <= INT32_MAX;
  pl.min_normal = std::ldexp(1.0, m.acc.emin());
  pl.overflow = std::ldexp(1.0, m.acc.emax() + 1);
  return pl;
}

// One block-FMA kernel: values of type T and exponents of type X (double and int32, or float and
// int16 for the float-lane kernel) in panels of width w, row panels computed by panel().
template <class T, class X>
struct BlockKernel {
  int64_t w;
  void (*panel)(const BlockFmaPlan&, const T*, const X*, const T*, const X*, int64_t, BlockState);
};

// Every output of the block model. B is packed once (values and exponents, panels of w columns
// over the whole K); threads take tasks of rows of C, whose rows of A they decompose, and run
// each panel over K in slices of kc (on block and promotion boundaries) so that the panel's slice
// stays in L1 while it meets every row of the task. The state of a task's panel (running block
// result, outer sum, redo flag) is the thread's own, small and cache-resident; lanes flagged for
// the scalar path are redone when the panel ends.
template <class T, class X>
void block_fma_run(const KernelArgs& x, const AccumEngine& eng, const Format& a_fmt, const Format& b_fmt,
                   const BlockKernel<T, X>& kern, double* acc) {
  const AccumModel& m = eng.model();
  const BlockFmaParams& bp = m.block;
  const BlockFmaPlan pl = make_plan(m);
  const int64_t w = kern.w, panels = ceil_div(x.n, w), k = x.k;
  const int64_t period = m.promote_every > 0 ? m.promote_every : bp.block_size;
  const int64_t kc = std::min(k, period * ceil_div(kBlockKc, period));
  const size_t packed = static_cast<size_t>(std::max<int64_t>(1, panels * k * w));
  auto pb = hwy::AllocateAligned<T>(packed);
  auto pbe = hwy::AllocateAligned<X>(packed);
  // Rows per task: kMc, fewer where K is long (a task's decomposed rows stay within 2^20 values).
  const int64_t mc = std::clamp<int64_t>((int64_t{1} << 20) / std::max<int64_t>(k, 1), 1, kMc);
  const int64_t row_blocks = ceil_div(x.m, mc);
#pragma omp parallel num_threads(x.threads)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < panels; ++t)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < w; ++j) {
          const size_t o = static_cast<size_t>((t * k + p) * w + j);
          const int64_t col = t * w + j;
          if (col < x.n)
            decompose(x.b[p * x.b_ks + col * x.b_cs], b_fmt, bp.in_subnormals, pb[o], pbe[o]);
          else
            pb[o] = 0, pbe[o] = no_exponent<X>();
        }
    std::vector<T> av(static_cast<size_t>(mc * k));
    std::vector<X> ae(av.size());
    const size_t state_size = static_cast<size_t>(mc * w);
    auto d = hwy::AllocateAligned<double>(state_size), outer = hwy::AllocateAligned<double>(state_size),
         bad = hwy::AllocateAligned<double>(state_size);
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < row_blocks; ++blk) {
      const int64_t i0 = blk * mc, rows = std::min(x.m, i0 + mc) - i0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t p = 0; p < k; ++p)
          decompose(x.a[(i0 + r) * x.a_rs + p * x.a_ks], a_fmt, bp.in_subnormals, av[r * k + p], ae[r * k + p]);
      for (int64_t t = 0; t < panels; ++t) {
        std::fill(d.get(), d.get() + state_size, 0.0);
        std::fill(outer.get(), outer.get() + state_size, 0.0);
        std::fill(bad.get(), bad.get() + state_size, 0.0);
        for (int64_t pc = 0; pc < k; pc += kc)
          for (int64_t r = 0; r < rows; ++r)
            kern.panel(pl, av.data() + r * k + pc, ae.data() + r * k + pc, pb.get() + (t * k + pc) * w,
                       pbe.get() + (t * k + pc) * w, std::min(kc, k - pc),
                       {d.get() + r * w, outer.get() + r * w, bad.get() + r * w});
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < std::min(w, x.n - t * w); ++j) {
            const int64_t i = i0 + r, col = t * w + j;
            const size_t o = static_cast<size_t>(r * w + j);
            uint32_t st = 0;
            // Lanes whose block results left the normal range of the output format: the scalar path.
            acc[i * x.n + col] = bad[o] != 0
                                     ? eng.dot({x.a + i * x.a_rs, x.a_ks, x.b + col * x.b_cs, x.b_ks, k}, 0.0, st)
                                 : m.promote_every > 0 ? outer[o]
                                                       : d[o];
          }
      }
    }
  }
}

}  // namespace

bool block_fma_gemm(const KernelArgs& x, const AccumEngine& eng, const Format& a_fmt, const Format& b_fmt,
                    double* acc) {
  const AccumModel& m = eng.model();
  if (!block_vectorisable(m)) return false;
  const OperandScan a = scan(x.a, x.m, x.k, x.a_rs, x.a_ks), b = scan(x.b, x.k, x.n, x.b_ks, x.b_cs);
  if (!a.finite || !b.finite) return false;
  if (block_fma_f32_fits(m, a_fmt, b_fmt, a, b))
    block_fma_run(x, eng, a_fmt, b_fmt, BlockKernel<float, int16_t>{block_fma_f32_width(), block_fma_f32_row_panel},
                  acc);
  else
    block_fma_run(x, eng, a_fmt, b_fmt, BlockKernel<double, int32_t>{block_fma_width(), block_fma_row_panel}, acc);
  return true;
}

}  // namespace precsim::detail

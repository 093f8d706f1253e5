// The vectorised GEMM micro-kernels (Google Highway, compiled for every x86 target and picked at
// run time). Vectors run over independent outputs (columns of C); each output's K order is the
// scalar path's, and every lane does the scalar path's operations, so every target gives the
// scalar path's bits (tests/gemm_simd_test.cpp runs each compiled target).
//
// FP32 sequential: acc = acc + a*b (two IEEE roundings, no contraction), or one fused
// multiply-add per step where the model says fma (std::fma per lane where the target has none).
//
// Block FMA (reference section 2.1), in double lanes: a*b of two values that fit a float is exact
// in a double; the aligned, truncated term trunc(|a*b| * 2^(F-E)) is an integer below 2^(F+2), so
// with F + 2 + bits(n + 1) <= 53 every term and the whole block sum are exact doubles, and the
// block result S * 2^(E-F) rounds to the output's fraction bits on its bit pattern. Lanes whose
// result leaves the output format's normal range are flagged and redone by the scalar path.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/accum/gemm_simd_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "gemm_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace precsim::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DD = hn::ScalableTag<double>;

// Rows and column vectors of one FP32 micro-tile: 16 accumulators where there are 32 registers.
constexpr int64_t kSeqRows = HWY_MAX_BYTES >= 64 ? 8 : 4;
constexpr int64_t kSeqVecs = 2;

TileShape SeqShape() { return {kSeqRows, kSeqVecs * static_cast<int64_t>(hn::Lanes(DF()))}; }

template <class V>
HWY_INLINE V FusedMulAdd(V a, V b, V c) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(a, b, c);
#else
  const DF d;
  HWY_ALIGN float xa[hn::MaxLanes(d)], xb[hn::MaxLanes(d)], xc[hn::MaxLanes(d)];
  hn::Store(a, d, xa);
  hn::Store(b, d, xb);
  hn::Store(c, d, xc);
  for (size_t i = 0; i < hn::Lanes(d); ++i) xc[i] = std::fma(xa[i], xb[i], xc[i]);
  return hn::Load(d, xc);
#endif
}

// c[r * ldc + j] (r < kSeqRows, j < the tile width) continues its sum over k products of the
// packed micro-panels a[p * kSeqRows + r] and b[p * width + j]; first: the sums start at zero.
template <bool kFma>
HWY_INLINE void SeqTile(int64_t k, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float* HWY_RESTRICT c,
                        int64_t ldc, bool first) {
  const DF d;
  const size_t N = hn::Lanes(d);
  using V = hn::Vec<DF>;
  V acc[kSeqRows][kSeqVecs];
  for (int64_t r = 0; r < kSeqRows; ++r)
    for (int64_t v = 0; v < kSeqVecs; ++v) acc[r][v] = first ? hn::Zero(d) : hn::LoadU(d, c + r * ldc + v * N);
  for (int64_t p = 0; p < k; ++p) {
    V bv[kSeqVecs];
    for (int64_t v = 0; v < kSeqVecs; ++v) bv[v] = hn::Load(d, b + (p * kSeqVecs + v) * N);
    for (int64_t r = 0; r < kSeqRows; ++r) {
      const V av = hn::Set(d, a[p * kSeqRows + r]);
      for (int64_t v = 0; v < kSeqVecs; ++v) {
        if constexpr (kFma) acc[r][v] = FusedMulAdd(av, bv[v], acc[r][v]);
        else acc[r][v] = hn::Add(acc[r][v], hn::Mul(av, bv[v]));
      }
    }
  }
  for (int64_t r = 0; r < kSeqRows; ++r)
    for (int64_t v = 0; v < kSeqVecs; ++v) hn::StoreU(acc[r][v], d, c + r * ldc + v * N);
}

void SeqF32Tile(int64_t k, const float* a, const float* b, float* c, int64_t ldc, bool first, bool fma) {
  if (fma) SeqTile<true>(k, a, b, c, ldc, first);
  else SeqTile<false>(k, a, b, c, ldc, first);
}

// Column vectors of one block-FMA row panel.
constexpr int64_t kBlockVecs = 2;

int64_t BlockWidth() { return kBlockVecs * static_cast<int64_t>(hn::Lanes(DD())); }

// 2^v for integral v in [1 - 1023, 2046 - 1023] (clamped there): v + 1023 + 2^52 holds the biased
// exponent in its low mantissa bits, which a shift moves into the exponent field.
HWY_INLINE hn::Vec<DD> Pow2(hn::Vec<DD> v) {
  const DD d;
  const hn::RebindToUnsigned<DD> du;
  const auto biased = hn::Min(hn::Max(hn::Add(v, hn::Set(d, 1023.0)), hn::Set(d, 1.0)), hn::Set(d, 2046.0));
  return hn::BitCast(d, hn::ShiftLeft<52>(hn::BitCast(du, hn::Add(biased, hn::Set(d, 0x1p52)))));
}

// floor(log2 |x|) of normal doubles x, as a double (the exponent field minus the bias).
HWY_INLINE hn::Vec<DD> Exponent(hn::Vec<DD> x) {
  const DD d;
  const hn::RebindToUnsigned<DD> du;
  const auto field = hn::ShiftRight<52>(hn::BitCast(du, hn::Abs(x)));
  return hn::Sub(hn::BitCast(d, hn::Or(field, hn::BitCast(du, hn::Set(d, 0x1p52)))), hn::Set(d, 0x1p52 + 1023.0));
}

using VD = hn::Vec<DD>;
using MD = hn::Mask<DD>;
#if HWY_TARGET == HWY_SCALAR
using DI = hn::Rebind<int32_t, DD>;  // one lane
#else
using DI = hn::Repartition<int32_t, DD>;  // twice the lanes of DD
#endif
using VI = hn::Vec<DI>;

// One block FMA for the panel's vectors of outputs: c[v] is the running value, the products run
// over a[t] * b[t * W + v * N + lane] for t < len. The exponents are int32 (zero operands
// kNoExponentI32), so one vector of int32 lanes covers both double vectors of outputs: the
// maximum over the block costs half the operations of double lanes. The maximum and the sum are
// exact (the sum of integers below 2^53), so the sum is split over two partials for throughput.
HWY_INLINE void BlockStep(const BlockFmaPlan& pl, const double* HWY_RESTRICT av, const int32_t* HWY_RESTRICT ae,
                          const double* HWY_RESTRICT bv, const int32_t* HWY_RESTRICT be, int64_t len,
                          VD (&c)[kBlockVecs], MD (&bad)[kBlockVecs]) {
  const DD d;
  const DI di;
  const hn::Rebind<int32_t, DD> dih;
  const hn::RebindToUnsigned<DD> du;
  const size_t N = hn::Lanes(d), NI = hn::Lanes(di);
  const int64_t W = BlockWidth(), int_vecs = W / static_cast<int64_t>(NI);  // 1; 2 on the scalar target
  const auto zero = hn::Zero(d);
  VI em[kBlockVecs];
  for (int64_t u = 0; u < int_vecs; ++u) em[u] = hn::Set(di, kNoExponentI32);
  for (int64_t t = 0; t < len; ++t) {
    const auto a = hn::Set(di, ae[t]);
    for (int64_t u = 0; u < int_vecs; ++u) em[u] = hn::Max(em[u], hn::Add(a, hn::Load(di, be + t * W + u * NI)));
  }
  HWY_ALIGN int32_t emax[kBlockVecs * hn::MaxLanes(DD())];
  for (int64_t u = 0; u < int_vecs; ++u) hn::Store(em[u], di, emax + u * NI);
  VD e[kBlockVecs], s0[kBlockVecs], s1[kBlockVecs], scale[kBlockVecs];
  for (int64_t v = 0; v < kBlockVecs; ++v) {
    // The accumulator's exponent (clamped to its format's emin) joins the maximum; zero has none.
    const auto c_exp = hn::IfThenElse(hn::Eq(c[v], zero), hn::Set(d, kNoExponent),
                                      hn::Max(Exponent(c[v]), hn::Set(d, pl.acc_emin)));
    const auto products = hn::PromoteTo(d, hn::Load(dih, emax + v * N));
    e[v] = hn::Max(hn::Max(hn::Set(d, pl.floor), c_exp), products);
    scale[v] = Pow2(hn::Sub(hn::Set(d, pl.frac_bits), e[v]));
    s0[v] = hn::Add(zero, hn::Trunc(hn::Mul(c[v], scale[v])));  // +0 + (-0) keeps zero sums positive
    s1[v] = zero;
  }
  int64_t t = 0;
  for (; t + 1 < len; t += 2) {
    const auto a0 = hn::Set(d, av[t]), a1 = hn::Set(d, av[t + 1]);
    for (int64_t v = 0; v < kBlockVecs; ++v) {
      s0[v] = hn::Add(s0[v], hn::Trunc(hn::Mul(hn::Mul(a0, hn::Load(d, bv + t * W + v * N)), scale[v])));
      s1[v] = hn::Add(s1[v], hn::Trunc(hn::Mul(hn::Mul(a1, hn::Load(d, bv + (t + 1) * W + v * N)), scale[v])));
    }
  }
  if (t < len) {
    const auto a0 = hn::Set(d, av[t]);
    for (int64_t v = 0; v < kBlockVecs; ++v)
      s0[v] = hn::Add(s0[v], hn::Trunc(hn::Mul(hn::Mul(a0, hn::Load(d, bv + t * W + v * N)), scale[v])));
  }
  for (int64_t v = 0; v < kBlockVecs; ++v) {
    const auto r = hn::Mul(hn::Add(s0[v], s1[v]), Pow2(hn::Sub(e[v], hn::Set(d, pl.frac_bits))));
    // Round |r| to out_frac_bits on its bits: clear the dropped bits, after adding half minus one
    // plus the kept lsb for nearest-even (a carry moves into the exponent by itself).
    const auto sign = hn::And(hn::BitCast(du, r), hn::Set(du, uint64_t{1} << 63));
    auto mag = hn::AndNot(hn::Set(du, uint64_t{1} << 63), hn::BitCast(du, r));
    if (pl.nearest_even) {
      const auto lsb = hn::And(hn::ShiftRightSame(mag, pl.drop_bits), hn::Set(du, 1));
      mag = hn::Add(mag, hn::Add(hn::Set(du, (uint64_t{1} << (pl.drop_bits - 1)) - 1), lsb));
    }
    mag = hn::AndNot(hn::Set(du, (uint64_t{1} << pl.drop_bits) - 1), mag);
    c[v] = hn::BitCast(d, hn::Or(sign, mag));
    const auto abs = hn::BitCast(d, mag);
    bad[v] = hn::Or(bad[v], hn::And(hn::Ne(abs, zero), hn::Or(hn::Lt(abs, hn::Set(d, pl.min_normal)),
                                                             hn::Ge(abs, hn::Set(d, pl.overflow)))));
  }
}

// One row of op(A) against one packed panel of op(B), over one K slice that starts on a block
// (and promotion) boundary. state holds, per output of the panel, the running block result,
// the FP32 outer accumulator and the flag of lanes the scalar path must redo.
void BlockRowPanel(const BlockFmaPlan& pl, const double* av, const int32_t* ae, const double* pv, const int32_t* pe,
                   int64_t kl, BlockState state) {
  const DD d;
  const hn::Rebind<float, DD> df;
  const size_t N = hn::Lanes(d);
  const int64_t W = BlockWidth();
  const int64_t period = pl.promote_every > 0 ? pl.promote_every : pl.block_size;
  VD c[kBlockVecs], outer[kBlockVecs];
  MD bad[kBlockVecs];
  for (int64_t v = 0; v < kBlockVecs; ++v) {
    c[v] = hn::Load(d, state.d + v * N);
    outer[v] = hn::Load(d, state.outer + v * N);
    bad[v] = hn::Gt(hn::Load(d, state.bad + v * N), hn::Zero(d));
  }
  // Row p of the panel: W values at pv + p * W, W exponents at pe + p * W.
  for (int64_t g = 0; g < kl; g += period) {
    const int64_t ge = std::min(kl, g + period);
    if (pl.promote_every > 0)
      for (auto& cv : c) cv = hn::Zero(d);
    for (int64_t b = g; b < ge; b += pl.block_size) {
      const int64_t len = std::min(ge - b, static_cast<int64_t>(pl.block_size));
      BlockStep(pl, av + b, ae + b, pv + b * W, pe + b * W, len, c, bad);
    }
    if (pl.promote_every > 0) {
      // The CUDA-core FP32 add, nearest-even: both operands are floats.
      for (int64_t v = 0; v < kBlockVecs; ++v)
        outer[v] = hn::PromoteTo(d, hn::Add(hn::DemoteTo(df, outer[v]), hn::DemoteTo(df, c[v])));
    }
  }
  for (int64_t v = 0; v < kBlockVecs; ++v) {
    hn::Store(c[v], d, state.d + v * N);
    hn::Store(outer[v], d, state.outer + v * N);
    hn::Store(hn::IfThenElseZero(bad[v], hn::Set(d, 1.0)), d, state.bad + v * N);
  }
}

int64_t KernelTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace precsim::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <hwy/targets.h>

namespace precsim::detail {

HWY_EXPORT(SeqShape);
HWY_EXPORT(SeqF32Tile);
HWY_EXPORT(BlockWidth);
HWY_EXPORT(BlockRowPanel);
HWY_EXPORT(KernelTarget);

TileShape seq_f32_tile_shape() { return HWY_DYNAMIC_DISPATCH(SeqShape)(); }
void seq_f32_tile(int64_t k, const float* a, const float* b, float* c, int64_t ldc, bool first, bool fma) {
  HWY_DYNAMIC_DISPATCH(SeqF32Tile)(k, a, b, c, ldc, first, fma);
}
int64_t block_fma_width() { return HWY_DYNAMIC_DISPATCH(BlockWidth)(); }
void block_fma_row_panel(const BlockFmaPlan& pl, const double* av, const int32_t* ae, const double* pv,
                         const int32_t* pe, int64_t kl, BlockState state) {
  HWY_DYNAMIC_DISPATCH(BlockRowPanel)(pl, av, ae, pv, pe, kl, state);
}
std::string gemm_simd_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(KernelTarget)()); }

}  // namespace precsim::detail
#endif  // HWY_ONCE

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
#include <bit>
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
        if constexpr (kFma)
          acc[r][v] = FusedMulAdd(av, bv[v], acc[r][v]);
        else
          acc[r][v] = hn::Add(acc[r][v], hn::Mul(av, bv[v]));
      }
    }
  }
  for (int64_t r = 0; r < kSeqRows; ++r)
    for (int64_t v = 0; v < kSeqVecs; ++v) hn::StoreU(acc[r][v], d, c + r * ldc + v * N);
}

void SeqF32Tile(int64_t k, const float* a, const float* b, float* c, int64_t ldc, bool first, bool fma) {
  if (fma)
    SeqTile<true>(k, a, b, c, ldc, first);
  else
    SeqTile<false>(k, a, b, c, ldc, first);
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

using DU = hn::RebindToUnsigned<DD>;
using VU = hn::Vec<DU>;

// The magnitudes of a lane's block results so far, on their bits: the smallest non-zero one less
// one (zero wraps to the largest value) and the largest. OutOfRange() tells from them, once a
// panel ends, the lanes whose results left the output format's normal range.
struct Seen {
  VU lo, hi;
};

HWY_INLINE Seen NothingSeen() { return {hn::Set(DU(), ~uint64_t{0}), hn::Zero(DU())}; }

// The block result r (S * 2^(E-F), exact) rounded to the output's fraction bits on its bits into c:
// clear the dropped bits, after adding half minus one plus the kept lsb for nearest-even (a carry
// moves into the exponent by itself and never reaches the sign).
HWY_INLINE void RoundBlockResult(const BlockFmaPlan& pl, VD r, VD& c, Seen& seen) {
  const DU du;
  auto bits = hn::BitCast(du, r);
  if (pl.nearest_even) {
    const auto lsb = hn::And(hn::ShiftRightSame(bits, pl.drop_bits), hn::Set(du, 1));
    bits = hn::Add(bits, hn::Add(hn::Set(du, (uint64_t{1} << (pl.drop_bits - 1)) - 1), lsb));
  }
  bits = hn::AndNot(hn::Set(du, (uint64_t{1} << pl.drop_bits) - 1), bits);
  c = hn::BitCast(DD(), bits);
  const auto mag = hn::AndNot(hn::Set(du, uint64_t{1} << 63), bits);
  seen.lo = hn::Min(seen.lo, hn::Sub(mag, hn::Set(du, 1)));
  seen.hi = hn::Max(seen.hi, mag);
}

// Lanes with a non-zero result below the output's smallest normal or at its overflow threshold.
// The bits compare as the doubles they are (positive, finite); lo's largest value is a NaN, which
// compares false.
HWY_INLINE MD OutOfRange(const BlockFmaPlan& pl, const Seen& seen) {
  const DD d;
  const auto below = hn::BitCast(d, hn::Set(DU(), std::bit_cast<uint64_t>(pl.min_normal) - 1));
  return hn::Or(hn::Lt(hn::BitCast(d, seen.lo), below), hn::Ge(hn::BitCast(d, seen.hi), hn::Set(d, pl.overflow)));
}

// The accumulator's exponent (clamped to its format's emin) for the block's maximum; zero has none.
HWY_INLINE VD AccExponent(const BlockFmaPlan& pl, VD c) {
  const DD d;
  return hn::IfThenElse(hn::Eq(c, hn::Zero(d)), hn::Set(d, kNoExponent), hn::Max(Exponent(c), hn::Set(d, pl.acc_emin)));
}

// One block FMA for the panel's vectors of outputs: c[v] is the running value, the products run
// over a[t] * b[t * W + v * N + lane] for t < len. The exponents are int32 (zero operands
// kNoExponentI32), so one vector of int32 lanes covers both double vectors of outputs: the
// maximum over the block costs half the operations of double lanes. The maximum and the sum are
// exact (the sum of integers below 2^53), so the sum is split over two partials for throughput.
HWY_INLINE void BlockStep(const BlockFmaPlan& pl, const double* HWY_RESTRICT av, const int32_t* HWY_RESTRICT ae,
                          const double* HWY_RESTRICT bv, const int32_t* HWY_RESTRICT be, int64_t len,
                          VD (&c)[kBlockVecs], Seen (&seen)[kBlockVecs]) {
  const DD d;
  const DI di;
  const hn::Rebind<int32_t, DD> dih;
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
    const auto c_exp = AccExponent(pl, c[v]);
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
  for (int64_t v = 0; v < kBlockVecs; ++v)
    RoundBlockResult(pl, hn::Mul(hn::Add(s0[v], s1[v]), Pow2(hn::Sub(e[v], hn::Set(d, pl.frac_bits)))), c[v], seen[v]);
}

#if HWY_TARGET != HWY_SCALAR
// --- Block FMA in float lanes, twice the outputs per vector. ---
// Where the driver has checked the operands (block_fma_f32_fits in gemm_kernels.cpp): every a*b is
// an exact normal float (significands of 24 bits or fewer together, exponent sums within float's
// range), and every scale 2^(F-E) that meets a non-zero product is a normal float. Then
// a*b*2^(F-E) is exact where it is 1 or more (and below 1, so truncated to zero, where it
// underflows), the truncating conversion to int32 is the aligned term (below 2^(F+2)), and the
// two int32 partial sums of ceil(n/2) terms or fewer stay below 2^31. The block sum, the
// accumulator's term and the rounding are the double kernel's, on each half of the float lanes.
using DF32 = hn::ScalableTag<float>;
using VF = hn::Vec<DF32>;
using DI32 = hn::RebindToSigned<DF32>;
using VI32 = hn::Vec<DI32>;
using DIH = hn::Rebind<int32_t, DD>;          // half of DI32's lanes
using DI16 = hn::Repartition<int16_t, DF32>;  // one vector: the exponents of a panel row
using DH16 = hn::Half<DI16>;
constexpr int64_t kFloatVecs = 2;  // int16 lanes are twice the float lanes: one int16 vector per panel row

int64_t FloatBlockWidth() { return kFloatVecs * static_cast<int64_t>(hn::Lanes(DF32())); }

// trunc(v) of floats known to lie within int32 (no fix-up of out-of-range lanes needed).
HWY_INLINE VI32 TruncToI32(VF v) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return VI32{_mm512_cvttps_epi32(v.raw)};
#elif HWY_TARGET == HWY_AVX2
  return VI32{_mm256_cvttps_epi32(v.raw)};
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  return VI32{_mm_cvttps_epi32(v.raw)};
#else
  return hn::ConvertTo(DI32(), v);
#endif
}

// 2^(v - 1023) of biased exponents v in [1, 2046], one int32 half of them per double lane.
HWY_INLINE VD Pow2OfBiased(hn::Vec<DIH> v) {
  const hn::Rebind<int64_t, DD> d64;
  return hn::BitCast(DD(), hn::ShiftLeft<52>(hn::PromoteTo(d64, v)));
}

HWY_INLINE VI32 Clamp(VI32 v, int32_t lo, int32_t hi) {
  const DI32 di;
  return hn::Min(hn::Max(v, hn::Set(di, lo)), hn::Set(di, hi));
}

// One block FMA for 2 * kFloatVecs vectors of double outputs c (the lanes of float vector u are
// c[2u] then c[2u + 1]); products a[t] * b[t * W + lane] for t < len. The exponents and scales
// are worked out once per float vector in int32 lanes: c's exponent from the high words of its
// doubles, the powers of two as exponent fields.
HWY_INLINE void FloatBlockStep(const BlockFmaPlan& pl, const float* HWY_RESTRICT av, const int16_t* HWY_RESTRICT ae,
                               const float* HWY_RESTRICT bv, const int16_t* HWY_RESTRICT be, int64_t len,
                               VD (&c)[2 * kFloatVecs], Seen (&seen)[2 * kFloatVecs]) {
  const DD d;
  const DF32 df;
  const DI32 di;
  const DIH dih;
  const size_t NF = hn::Lanes(df);
  const int64_t W = FloatBlockWidth();
  const int32_t f = static_cast<int32_t>(pl.frac_bits);
  // The products' largest exponent sum over the block: one int16 vector covers the panel.
  const DI16 d16;
  auto em16 = hn::Set(d16, static_cast<int16_t>(2 * kNoExponentI16));
  for (int64_t t = 0; t < len; ++t) em16 = hn::Max(em16, hn::Add(hn::Set(d16, ae[t]), hn::Load(d16, be + t * W)));
  const VI32 em[2] = {hn::PromoteTo(di, hn::LowerHalf(DH16(), em16)), hn::PromoteTo(di, hn::UpperHalf(DH16(), em16))};
  VI32 s0[kFloatVecs], s1[kFloatVecs], down[kFloatVecs];
  VF scale[kFloatVecs];
  VD acc_term[2 * kFloatVecs];
  for (int64_t u = 0; u < kFloatVecs; ++u) {
    // c's exponent field (c is zero or normal), clamped to the format's emin; zero has none.
    const auto high = hn::ConcatOdd(di, hn::BitCast(di, c[2 * u + 1]), hn::BitCast(di, c[2 * u]));
    const auto field = hn::And(hn::ShiftRight<20>(high), hn::Set(di, 0x7ff));
    const auto c_exp =
        hn::IfThenElse(hn::Eq(field, hn::Zero(di)), hn::Set(di, kNoExponentI32),
                       hn::Max(hn::Sub(field, hn::Set(di, 1023)), hn::Set(di, static_cast<int32_t>(pl.acc_emin))));
    const auto e = hn::Max(hn::Max(hn::Set(di, static_cast<int32_t>(pl.floor)), c_exp), em[u]);
    // 2^(F-E) as a float, clamped to float's normal range (where it clamps, every product is zero).
    scale[u] = hn::BitCast(df, hn::ShiftLeft<23>(Clamp(hn::Sub(hn::Set(di, f + 127), e), 1, 254)));
    const auto up = Clamp(hn::Sub(hn::Set(di, f + 1023), e), 1, 2046);  // 2^(F-E), 2^(E-F) as doubles
    down[u] = Clamp(hn::Add(e, hn::Set(di, 1023 - f)), 1, 2046);
    // +0 + (-0) keeps zero sums positive.
    acc_term[2 * u] = hn::Add(hn::Zero(d), hn::Trunc(hn::Mul(c[2 * u], Pow2OfBiased(hn::LowerHalf(dih, up)))));
    acc_term[2 * u + 1] = hn::Add(hn::Zero(d), hn::Trunc(hn::Mul(c[2 * u + 1], Pow2OfBiased(hn::UpperHalf(dih, up)))));
    s0[u] = s1[u] = hn::Zero(di);
  }
  int64_t t = 0;
  for (; t + 1 < len; t += 2) {
    const auto a0 = hn::Set(df, av[t]), a1 = hn::Set(df, av[t + 1]);
    for (int64_t u = 0; u < kFloatVecs; ++u) {
      s0[u] = hn::Add(s0[u], TruncToI32(hn::Mul(hn::Mul(a0, hn::Load(df, bv + t * W + u * NF)), scale[u])));
      s1[u] = hn::Add(s1[u], TruncToI32(hn::Mul(hn::Mul(a1, hn::Load(df, bv + (t + 1) * W + u * NF)), scale[u])));
    }
  }
  if (t < len) {
    const auto a0 = hn::Set(df, av[t]);
    for (int64_t u = 0; u < kFloatVecs; ++u)
      s0[u] = hn::Add(s0[u], TruncToI32(hn::Mul(hn::Mul(a0, hn::Load(df, bv + t * W + u * NF)), scale[u])));
  }
  for (int64_t u = 0; u < kFloatVecs; ++u) {
    VD sum[2];
    if (pl.int32_sum) {  // the len terms together stay below 2^31
      const auto s = hn::Add(s0[u], s1[u]);
      sum[0] = hn::PromoteTo(d, hn::LowerHalf(dih, s));
      sum[1] = hn::PromoteTo(d, hn::UpperHalf(dih, s));
    } else {
      sum[0] = hn::Add(hn::PromoteTo(d, hn::LowerHalf(dih, s0[u])), hn::PromoteTo(d, hn::LowerHalf(dih, s1[u])));
      sum[1] = hn::Add(hn::PromoteTo(d, hn::UpperHalf(dih, s0[u])), hn::PromoteTo(d, hn::UpperHalf(dih, s1[u])));
    }
    RoundBlockResult(pl, hn::Mul(hn::Add(acc_term[2 * u], sum[0]), Pow2OfBiased(hn::LowerHalf(dih, down[u]))), c[2 * u],
                     seen[2 * u]);
    RoundBlockResult(pl, hn::Mul(hn::Add(acc_term[2 * u + 1], sum[1]), Pow2OfBiased(hn::UpperHalf(dih, down[u]))),
                     c[2 * u + 1], seen[2 * u + 1]);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// One row of op(A) against one packed panel of op(B) (kVecs double vectors of outputs, W values and
// W exponents per k), over one K slice that starts on a block (and promotion) boundary, each block
// by step. state holds, per output of the panel, the running block result, the FP32 outer
// accumulator and the flag of lanes the scalar path must redo.
template <int64_t kVecs, class T, class X, class Step>
HWY_INLINE void RowPanel(const BlockFmaPlan& pl, const T* av, const X* ae, const T* pv, const X* pe, int64_t kl,
                         BlockState state, int64_t W, Step step) {
  const DD d;
  const hn::Rebind<float, DD> df;
  const size_t N = hn::Lanes(d);
  const int64_t period = pl.promote_every > 0 ? pl.promote_every : pl.block_size;
  VD c[kVecs], outer[kVecs];
  Seen seen[kVecs];
  for (int64_t v = 0; v < kVecs; ++v) {
    c[v] = hn::Load(d, state.d + v * N);
    outer[v] = hn::Load(d, state.outer + v * N);
    seen[v] = NothingSeen();
  }
  for (int64_t g = 0; g < kl; g += period) {
    const int64_t ge = std::min(kl, g + period);
    if (pl.promote_every > 0)
      for (auto& cv : c) cv = hn::Zero(d);
    for (int64_t b = g; b < ge; b += pl.block_size) {
      const int64_t len = std::min(ge - b, static_cast<int64_t>(pl.block_size));
      step(pl, av + b, ae + b, pv + b * W, pe + b * W, len, c, seen);
    }
    if (pl.promote_every > 0) {
      // The CUDA-core FP32 add, nearest-even: both operands are floats.
      for (int64_t v = 0; v < kVecs; ++v)
        outer[v] = hn::PromoteTo(d, hn::Add(hn::DemoteTo(df, outer[v]), hn::DemoteTo(df, c[v])));
    }
  }
  for (int64_t v = 0; v < kVecs; ++v) {
    hn::Store(c[v], d, state.d + v * N);
    hn::Store(outer[v], d, state.outer + v * N);
    const auto bad = hn::Or(hn::Gt(hn::Load(d, state.bad + v * N), hn::Zero(d)), OutOfRange(pl, seen[v]));
    hn::Store(hn::IfThenElseZero(bad, hn::Set(d, 1.0)), d, state.bad + v * N);
  }
}

void BlockRowPanel(const BlockFmaPlan& pl, const double* av, const int32_t* ae, const double* pv, const int32_t* pe,
                   int64_t kl, BlockState state) {
  RowPanel<kBlockVecs>(pl, av, ae, pv, pe, kl, state, BlockWidth(), [](auto&&... args) { BlockStep(args...); });
}

// The float-lane kernel's outputs per panel; 0 on the scalar target, which has none.
int64_t F32BlockWidth() {
#if HWY_TARGET != HWY_SCALAR
  return FloatBlockWidth();
#else
  return 0;
#endif
}

void F32BlockRowPanel(const BlockFmaPlan& pl, const float* av, const int16_t* ae, const float* pv, const int16_t* pe,
                      int64_t kl, BlockState state) {
#if HWY_TARGET != HWY_SCALAR
  RowPanel<2 * kFloatVecs>(pl, av, ae, pv, pe, kl, state, FloatBlockWidth(),
                           [](auto&&... args) { FloatBlockStep(args...); });
#else
  (void)pl, (void)av, (void)ae, (void)pv, (void)pe, (void)kl, (void)state;
#endif
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
HWY_EXPORT(F32BlockWidth);
HWY_EXPORT(F32BlockRowPanel);
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
int64_t block_fma_f32_width() { return HWY_DYNAMIC_DISPATCH(F32BlockWidth)(); }
void block_fma_f32_row_panel(const BlockFmaPlan& pl, const float* av, const int16_t* ae, const float* pv,
                             const int16_t* pe, int64_t kl, BlockState state) {
  HWY_DYNAMIC_DISPATCH(F32BlockRowPanel)(pl, av, ae, pv, pe, kl, state);
}
std::string gemm_simd_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(KernelTarget)()); }

}  // namespace precsim::detail
#endif  // HWY_ONCE

// The element pass of MX and NVFP4 blocks as one specialised loop (Google Highway, every x86
// target, picked at run time): x * enc rounded to the element format (nearest-even or stochastic,
// saturating), times the block's decode scale, times NVFP4's tensor scale (1 for MX). The rounding
// is quantize_f32_round-inl.h's fixed-drop nearest-even and stochastic paths with the format's
// constants held in registers for the whole row: the generic loop of block_fused_kernel.cpp read
// its plan's fields per vector and reloaded spilled constants after every group's out-of-line
// scale call, which cost NVFP4 most of its time. block_fused.cpp checks the element plan before it
// takes this path (a format whose values at and above 2^emin all drop the same number of bits,
// overflow to the largest value) and sends rows with a NaN, Inf or infinite-scale block to the
// generic loop; tests/block_fused_test.cpp compares both with the scalar reference on every
// compiled target.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/block_row_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>

#include "block_kernel.h"
#include "quantize_f32_round-inl.h"

HWY_BEFORE_NAMESPACE();
namespace precsim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kSr, bool kPerColumn, bool kCount>
HWY_INLINE void RowLoop(const ElementRow& r, BlockPassCounts& k) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  using VU = hn::Vec<decltype(du)>;
  const size_t N = hn::Lanes(df);
  const F32Plan& e = *r.plan;
  const int drop = 23 - e.man_bits;  // bits dropped at and above 2^emin
  const VU kSign = hn::Set(du, 0x80000000u);
  const VU kDropMask = hn::Set(du, (1u << drop) - 1);
  const VU kHalfMinus1 = hn::Set(du, (1u << (drop - 1)) - 1);
  const VU kDropUnit = hn::Set(du, 1u << drop);
  const VU kOneU = hn::Set(du, 1u);
  const VU kMax = hn::Set(du, e.max_bits);            // saturation
  const auto kMinNormal = hn::Set(di, static_cast<int32_t>(e.flush_below));  // 2^emin
  const auto kMagic = hn::Set(df, e.magic);           // 2^(quantum exponent + 23)
  const auto kInvQuantum = hn::Set(df, e.inv_quantum), kQuantum = hn::Set(df, e.quantum);
  const auto k2p16 = hn::Set(df, 65536.0f);
  const auto kLim = hn::Set(df, r.max_below);
  const int shift = r.block_shift;
  const auto td = hn::Set(df, r.tensor_dec);
  const VU kSrMask = hn::Set(du, r.sr_mask), kK0 = hn::Set(du, r.k0), kK1 = hn::Set(du, r.k1);
  const VU kIota = hn::Iota(du, 0);
  const VU kMul1 = hn::Set(du, 0x7feb352du), kMul2 = hn::Set(du, 0x846ca68bu);
  const auto zero_i = hn::Zero(di);
  uint64_t sat = 0, flushed = 0;

  // sr_bits() of indices idx.. (quantize_f32_round-inl.h's random_bits).
  auto random_bits = [&](uint32_t idx) HWY_ATTR {
    VU x = hn::Xor(hn::Add(kIota, hn::Set(du, idx)), kK0);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) x = hn::Xor(x, kK1);
      x = hn::Xor(x, hn::ShiftRight<16>(x));
      x = hn::Mul(x, kMul1);
      x = hn::Xor(x, hn::ShiftRight<15>(x));
      x = hn::Mul(x, kMul2);
      x = hn::Xor(x, hn::ShiftRight<16>(x));
    }
    return x;
  };

  auto one = [&](size_t i, size_t count) HWY_ATTR {
    const auto x = LoadPart(df, r.in + i, count);
    hn::Vec<decltype(df)> es, d;
    if constexpr (kPerColumn) {
      es = LoadPart(df, r.enc + i, count);
      d = LoadPart(df, r.dec + i, count);
    } else {
      es = hn::Set(df, r.enc[i >> shift]);
      d = hn::Set(df, r.dec[i >> shift]);
    }
    const auto v = hn::Mul(x, es);
    const VU u = hn::BitCast(du, v);
    const VU sign = hn::And(u, kSign);
    const VU a = hn::Xor(u, sign);
    const auto below = hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), kMinNormal));
    VU mag;
    if constexpr (!kSr) {
      const VU odd = hn::And(hn::ShiftRightSame(a, drop), kOneU);
      mag = hn::AndNot(kDropMask, hn::Add(hn::Add(a, kHalfMinus1), odd));
      const VU small = hn::BitCast(du, hn::Sub(hn::Add(hn::BitCast(df, a), kMagic), kMagic));
      mag = hn::IfThenElse(below, small, mag);
    } else {
      // Below 2^emin, kept and the dropped fraction from |v| / quantum in float arithmetic
      // (exact), the fraction 16 bits at a time; at and above, the dropped bits at the top of a word.
      const auto z = hn::Mul(hn::BitCast(df, a), kInvQuantum);
      const auto ki = hn::ConvertTo(di, z);
      const auto h = hn::Mul(hn::Sub(z, hn::ConvertTo(df, ki)), k2p16);
      const auto hi = hn::ConvertTo(di, h);
      const auto lo = hn::ConvertTo(di, hn::Mul(hn::Sub(h, hn::ConvertTo(df, hi)), k2p16));
      const VU frac = hn::IfThenElse(below, hn::BitCast(du, hn::Or(hn::ShiftLeft<16>(hi), lo)), hn::ShiftLeftSame(a, 32 - drop));
      const auto fk = hn::BitCast(di, hn::Xor(hn::And(frac, kSrMask), kSign));
      const auto rk = hn::BitCast(di, hn::Xor(hn::And(random_bits(r.idx0 + static_cast<uint32_t>(i)), kSrMask), kSign));
      const VU up = hn::VecFromMask(du, hn::RebindMask(du, hn::Gt(fk, rk)));
      mag = hn::Add(hn::AndNot(kDropMask, a), hn::And(up, kDropUnit));
      const VU rounded = hn::Sub(hn::BitCast(du, ki), up);
      const VU small = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, rounded)), kQuantum));
      mag = hn::IfThenElse(below, small, mag);
    }
    mag = hn::Min(mag, kMax);
    const auto q = hn::BitCast(df, hn::Or(mag, sign));
    const auto y = hn::Mul(hn::Mul(q, d), td);  // q * d is exact; one rounding by the tensor scale (MX: 1)
    StorePart(df, y, count, r.out + i);
    if constexpr (kCount) {  // padding lanes are zeros: never saturated, never flushed
      sat += hn::CountTrue(df, hn::Gt(hn::Abs(v), kLim));
      const auto xa = hn::BitCast(di, hn::Abs(x));
      flushed += hn::CountTrue(di, hn::AndNot(hn::Eq(xa, zero_i), hn::RebindMask(di, hn::Eq(y, hn::Zero(df)))));
    }
  };
  size_t i = 0;
  for (; i + N <= r.n; i += N) one(i, N);
  if (i < r.n) one(i, r.n - i);
  k.saturated += sat;
  k.flushed += flushed;
}

HWY_NOINLINE void ElementRowPass(const ElementRow& r, BlockPassCounts* counts) {
  BlockPassCounts k;
  const int mode = (r.stochastic ? 4 : 0) + (r.per_column ? 2 : 0) + (counts ? 1 : 0);
  switch (mode) {
    case 0: RowLoop<false, false, false>(r, k); break;
    case 1: RowLoop<false, false, true>(r, k); break;
    case 2: RowLoop<false, true, false>(r, k); break;
    case 3: RowLoop<false, true, true>(r, k); break;
    case 4: RowLoop<true, false, false>(r, k); break;
    case 5: RowLoop<true, false, true>(r, k); break;
    case 6: RowLoop<true, true, false>(r, k); break;
    default: RowLoop<true, true, true>(r, k); break;
  }
  if (counts) {
    counts->saturated += k.saturated;
    counts->flushed += k.flushed;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace precsim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace precsim {

HWY_EXPORT(ElementRowPass);

void element_row_pass(const ElementRow& r, BlockPassCounts* counts) { HWY_DYNAMIC_DISPATCH(ElementRowPass)(r, counts); }

}  // namespace precsim
#endif  // HWY_ONCE

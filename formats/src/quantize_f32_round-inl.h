// The per-vector float32 rounding of the quantize kernel (quantize_f32_kernel.cpp), for every
// Highway target, as an inline template so other kernels (block scaling) round in registers
// between their own loads and stores. See quantize_f32_kernel.cpp for the method; tests compare
// every caller with the scalar reference on every compiled target.
//
// Highway's per-target include guard: included once per target by files that use foreach_target.
#if defined(PRECSIM_FORMATS_QUANTIZE_F32_ROUND_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PRECSIM_FORMATS_QUANTIZE_F32_ROUND_INL_H_
#undef PRECSIM_FORMATS_QUANTIZE_F32_ROUND_INL_H_
#else
#define PRECSIM_FORMATS_QUANTIZE_F32_ROUND_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>

#include "quantize_f32_plan.h"

// Each step of the rounding inlines into the loop of its caller, which passes vectors in
// registers (GCC otherwise keeps some of these lambdas as calls).
#ifndef PRECSIM_INLINE_LAMBDA
#define PRECSIM_INLINE_LAMBDA __attribute__((always_inline))
#endif

HWY_BEFORE_NAMESPACE();
namespace precsim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// count floats from p (count <= lanes), zeros beyond.
template <class D>
HWY_INLINE hn::Vec<D> LoadPart(D d, const float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::LoadU(d, p);
  HWY_ALIGN float b[hn::MaxLanes(d)] = {};
  std::copy_n(p, std::min(count, hn::MaxLanes(d)), b);  // the min: GCC's bounds warning on one lane
  return hn::Load(d, b);
}

// The first n lanes of v to out (n <= lanes).
template <class D, typename T>
HWY_INLINE void StorePart(D d, hn::Vec<D> v, size_t n, T* out) {
  if (n == hn::Lanes(d)) return hn::StoreU(v, d, out);
  HWY_ALIGN T b[hn::MaxLanes(d)];
  hn::Store(v, d, b);
  std::copy_n(b, std::min(n, hn::MaxLanes(d)), out);
}

// Counts in QuantStats order after `count`: inexact, underflow, subnormal, overflow, saturated, nan.
using Counts = uint64_t[6];

// Rounds n values: source(i, count) gives the floats i.. (count < lanes at the tail, zeros
// beyond), sink(i, rounded, count) takes the results. Inlined into each caller, so a caller can
// scale before and decode after the rounding without a pass through memory.
template <Rounding M, bool kStats, class Source, class Sink>
HWY_INLINE void RoundRun(const F32Plan& p, uint32_t k0, uint32_t k1, size_t n, uint32_t idx0, Counts& counts,
                         Source&& source, Sink&& sink) {
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToSigned<decltype(du)> di;
  const hn::RebindToFloat<decltype(du)> df;
  using VU = hn::Vec<decltype(du)>;
  using VI = hn::Vec<decltype(di)>;
  using MU = hn::Mask<decltype(du)>;
  const size_t N = hn::Lanes(du);

  const VU kSign = hn::Set(du, 0x80000000u);
  const VU kOne = hn::Set(du, 1u);
  const VU kZeroU = hn::Zero(du);
  const VI kDropNormal = hn::Set(di, 23 - p.man_bits);
  const VI kLeadBias = hn::Set(di, 127 + p.man_bits);
  const VI kDq = hn::Set(di, p.dq);
  const VI kGapBelow = hn::Set(di, static_cast<int32_t>(p.gap_below));
  const VI kDqGap = hn::Set(di, p.dq_gap);
  const VI k24 = hn::Set(di, 24);
  const VI k31 = hn::Set(di, 31);
  const VI k55 = hn::Set(di, 55);
  const VU kQuantum = hn::Set(du, p.quantum_bits);
  const VU kZeroBits = hn::Set(du, p.zero_bits);
  const VI kSubBelow = hn::Set(di, static_cast<int32_t>(p.subnormal_below));
  const VI kFlushBelow = hn::Set(di, static_cast<int32_t>(p.flush_below));
  const VI kMax = hn::Set(di, static_cast<int32_t>(p.max_bits));
  const VU kMaxU = hn::Set(du, p.max_bits);
  const VI kInf = hn::Set(di, 0x7f800000);
  const VI kLastFinite = hn::Set(di, 0x7f7fffff);
  const VU kSrMask = hn::Set(du, p.sr_mask);
  const VU kK0 = hn::Set(du, k0);
  const VU kK1 = hn::Set(du, k1);
  const VU kIota = hn::Iota(du, 0);
  const VU kMul1 = hn::Set(du, 0x7feb352du);
  const VU kMul2 = hn::Set(du, 0x846ca68bu);
  // The fixed-drop paths: d = 23 - m bits dropped at and above 2^emin.
  const int drop = 23 - p.man_bits;
  const VU kDropU = hn::Set(du, static_cast<uint32_t>(drop));
  const VU kDropUnit = hn::Set(du, 1u << drop);
  const VU kDropMask = hn::Set(du, (1u << drop) - 1);
  const VU kHalfMinus1 = hn::Set(du, drop > 0 ? (1u << (drop - 1)) - 1 : 0);
  const VU kFracShift = hn::Set(du, static_cast<uint32_t>(32 - drop) & 31);
  const auto kMagic = hn::Set(df, p.magic);
  const auto kQuantumF = hn::Set(df, p.quantum);
  const auto kInvQuantum = hn::Set(df, p.inv_quantum);
  const auto k2p16 = hn::Set(df, 65536.0f);

  // The nearest modes and SR round every overflow away from zero.
  constexpr bool kAwayAlways = M == Rounding::kNearestEven || M == Rounding::kNearestAway ||
                               M == Rounding::kStochastic;
  const VU kOverflowRes = hn::Set(du, p.overflow_nonfinite ? p.overflow_bits : p.max_bits);
  VU c_inexact = kZeroU, c_under = kZeroU, c_sub = kZeroU, c_over = kZeroU;
  uint64_t n_over = 0, n_sat = 0, n_nan = 0;

  // sr_bits(): hash32 of the low 32 bits of the index, keyed by the stream of its high bits.
  auto random_bits = [&](uint32_t idx) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    VU x = hn::Xor(hn::Add(kIota, hn::Set(du, idx)), kK0);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) x = hn::Xor(x, kK1);
      x = hn::Xor(x, hn::ShiftRight<16>(x));
      x = x * kMul1;
      x = hn::Xor(x, hn::ShiftRight<15>(x));
      x = x * kMul2;
      x = hn::Xor(x, hn::ShiftRight<16>(x));
    }
    return x;
  };

  // Overflow and special lanes, then the store and the statistics: shared by every path. `mag` is
  // the rounded magnitude, `res` the result with its sign; `over` flags lanes to look at again.
  auto finish = [&]<bool kTail>(VU u, VU sign, VU a, VU mag, VU res, MU over, MU under,
                                MU sub, MU valid) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    MU inexact = hn::Not(hn::Eq(mag, a));
    // Inf and NaN lanes carry garbage (even into the sign bit), so they are flagged from the input.
    MU special = hn::RebindMask(du, hn::Gt(hn::BitCast(di, a), kLastFinite));
    if (!p.is_signed) special = hn::Or(special, hn::AndNot(hn::Eq(u, kSign), hn::Eq(sign, kSign)));
    if constexpr (kAwayAlways) {
      // Every overflow goes the same way: no branch, so data that often overflows costs no
      // mispredictions. (Padding lanes of the tail are zeros and never overflow.)
      over = hn::AndNot(special, over);
      res = hn::IfThenElse(over, p.overflow_result_signed ? hn::Or(kOverflowRes, sign) : kOverflowRes, res);
      inexact = hn::Or(inexact, over);
      if constexpr (kStats) c_over = hn::Sub(c_over, hn::VecFromMask(du, over));
    }
    if (HWY_UNLIKELY(!hn::AllFalse(du, kAwayAlways ? special : hn::Or(over, special)))) {
      over = hn::AndNot(special, over);
      if (kTail) over = hn::And(over, valid);
      if (!kAwayAlways && !hn::AllFalse(du, over)) {
        MU away = over;
        if constexpr (M == Rounding::kTowardZero || M == Rounding::kOdd) away = hn::FirstN(du, 0);
        if constexpr (M == Rounding::kUp) away = hn::And(over, hn::Eq(sign, kZeroU));
        if constexpr (M == Rounding::kDown) away = hn::AndNot(hn::Eq(sign, kZeroU), over);
        const MU nonfinite = p.overflow_nonfinite ? away : hn::FirstN(du, 0);
        const MU to_max = hn::AndNot(nonfinite, over);
        const VU nf_bits = hn::Set(du, p.overflow_bits);
        res = hn::IfThenElse(nonfinite, p.overflow_signed ? hn::Or(nf_bits, sign) : nf_bits, res);
        res = hn::IfThenElse(to_max, hn::Or(kMaxU, sign), res);
        inexact = hn::Or(inexact, over);
        n_over += hn::CountTrue(du, over);
        n_sat += hn::CountTrue(du, to_max);
        if (p.overflow_is_nan) n_nan += hn::CountTrue(du, nonfinite);
      }
      if (!hn::AllFalse(du, special)) {
        MU nanlike = hn::RebindMask(du, hn::Gt(hn::BitCast(di, a), kInf));
        if (!p.is_signed) nanlike = hn::Or(nanlike, hn::AndNot(hn::Eq(u, kSign), hn::Eq(sign, kSign)));
        const MU inf = hn::AndNot(nanlike, hn::RebindMask(du, hn::Eq(hn::BitCast(di, a), kInf)));
        res = hn::IfThenElse(nanlike, hn::Set(du, p.nan_in_bits), res);
        const VU inf_bits = hn::Set(du, p.inf_bits);
        res = hn::IfThenElse(inf, p.inf_signed ? hn::Or(inf_bits, sign) : inf_bits, res);
        const MU nanlike_v = kTail ? hn::And(nanlike, valid) : nanlike;
        const MU inf_v = kTail ? hn::And(inf, valid) : inf;
        n_nan += hn::CountTrue(du, nanlike_v);
        if (p.inf_is_nan) n_nan += hn::CountTrue(du, inf_v);
        if (p.inf_saturates) n_sat += hn::CountTrue(du, inf_v);
        inexact = hn::AndNot(special, inexact);
        under = hn::AndNot(special, under);
        sub = hn::AndNot(special, sub);
      }
    }
    if constexpr (kStats) {
      if (kTail) {
        inexact = hn::And(inexact, valid);
        under = hn::And(under, valid);
        sub = hn::And(sub, valid);
      }
      c_inexact = hn::Sub(c_inexact, hn::VecFromMask(du, inexact));
      c_under = hn::Sub(c_under, hn::VecFromMask(du, under));
      c_sub = hn::Sub(c_sub, hn::VecFromMask(du, sub));
    }
    return res;
  };

  // Statistics of results below the normal range: zero from a non-zero input, or subnormal.
  auto small_stats = [&](VU a, VU mag, MU zero, MU& under, MU& sub) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    // E8M0 has no zero: its smallest value is not an underflow to zero.
    under = p.zero_inexact ? hn::FirstN(du, 0) : hn::AndNot(hn::Eq(a, kZeroU), zero);
    sub = hn::AndNot(zero, hn::RebindMask(du, hn::Lt(hn::BitCast(di, mag), kSubBelow)));
  };

  // Any mode, any lane: d varies per lane.
  auto general = [&]<bool kTail>(VU u, uint32_t idx, MU valid) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    const VU sign = hn::And(u, kSign);
    const VU a = hn::Xor(u, sign);
    const VU eeff = hn::Max(hn::ShiftRight<23>(a), kOne);
    const VU base = hn::ShiftLeft<23>(hn::Sub(eeff, kOne));
    const VU s = hn::Sub(a, base);
    const VI below_quantum = hn::Sub(kDq, hn::BitCast(di, eeff));
    VI d = hn::Max(kDropNormal, below_quantum);
    if (p.need_lead) {  // floor(log2 S) - m, read off S converted exactly to float
      const VU lead = hn::ShiftRight<23>(hn::BitCast(du, hn::ConvertTo(df, hn::BitCast(di, s))));
      d = hn::Max(hn::Sub(hn::BitCast(di, lead), kLeadBias), below_quantum);
    }
    if (p.gap) {
      const auto in_gap = hn::Lt(hn::BitCast(di, a), kGapBelow);
      d = hn::IfThenElse(in_gap, hn::Sub(kDqGap, hn::BitCast(di, eeff)), d);
    }
    const VI dk = hn::Min(d, k24);
    const VU dku = hn::BitCast(du, dk);
    VU kept = s >> dku;
    const MU inexact = hn::Not(hn::Eq(kept << dku, s));

    // The dropped bits at the top of a word: exact for d <= 32, and below 2^31 (under half a
    // quantum) beyond, where only stochastic rounding reads them and so needs them exact.
    VU frac = kZeroU;
    if constexpr (M == Rounding::kNearestEven || M == Rounding::kNearestAway ||
                  M == Rounding::kStochastic) {
      const VU s8 = hn::ShiftLeft<8>(s);
      frac = (s8 << hn::BitCast(du, hn::Sub(k24, dk))) >> hn::BitCast(du, hn::Min(hn::Sub(d, dk), k31));
      if constexpr (M == Rounding::kStochastic) {
        frac = hn::IfThenZeroElse(hn::RebindMask(du, hn::Gt(d, k55)), frac);
      }
    }
    if constexpr (M == Rounding::kNearestEven) {
      // frac > half, or frac == half and kept odd: frac ^ signbit > -(kept & 1), signed.
      const VI odd = hn::BitCast(di, hn::And(kept, kOne));
      const auto up = hn::Gt(hn::BitCast(di, hn::Xor(frac, kSign)), hn::Neg(odd));
      kept = hn::Sub(kept, hn::VecFromMask(du, hn::RebindMask(du, up)));
    } else if constexpr (M == Rounding::kNearestAway) {
      kept = hn::Add(kept, hn::ShiftRight<31>(frac));
    } else if constexpr (M == Rounding::kUp) {
      kept = hn::Sub(kept, hn::VecFromMask(du, hn::And(inexact, hn::Eq(sign, kZeroU))));
    } else if constexpr (M == Rounding::kDown) {
      kept = hn::Sub(kept, hn::VecFromMask(du, hn::AndNot(hn::Eq(sign, kZeroU), inexact)));
    } else if constexpr (M == Rounding::kOdd) {
      kept = hn::Or(kept, hn::IfThenElseZero(inexact, kOne));
    } else if constexpr (M == Rounding::kStochastic) {
      const VI fk = hn::BitCast(di, hn::Xor(hn::And(frac, kSrMask), kSign));
      const VI rk = hn::BitCast(di, hn::Xor(hn::And(random_bits(idx), kSrMask), kSign));
      kept = hn::Sub(kept, hn::VecFromMask(du, hn::RebindMask(du, hn::Gt(fk, rk))));
    }

    MU zero = hn::Eq(kept, kZeroU);
    if (p.flush) zero = hn::Or(zero, hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), kFlushBelow)));
    // Past 24 dropped bits kept is 0 or 1: the result is 0 or the quantum.
    VU mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(d, k24)), kQuantum, hn::Add(base, kept << dku));
    mag = hn::IfThenElse(zero, kZeroBits, mag);
    const VU res = hn::Or(mag, p.signed_zero ? sign : hn::IfThenZeroElse(zero, sign));
    const MU over = hn::RebindMask(du, hn::Gt(hn::BitCast(di, mag), kMax));
    MU under, sub;
    small_stats(a, mag, zero, under, sub);
    return finish.template operator()<kTail>(u, sign, a, mag, res, over, under, sub, valid);
  };

  // Nearest-even when every value at or above 2^emin has the same number of dropped bits: the
  // classic carry trick on the bits there, and below it one float addition of 2^(quantum+23),
  // whose own rounding is nearest-even at exactly the format's quantum (and exact otherwise).
  auto nearest_even = [&]<bool kTail>(VU u, uint32_t, MU valid) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    const VU sign = hn::And(u, kSign);
    const VU a = hn::Xor(u, sign);
    const VU odd = hn::And(a >> kDropU, kOne);
    VU mag = hn::AndNot(kDropMask, hn::Add(hn::Add(a, kHalfMinus1), odd));
    const MU below = hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), kFlushBelow));
    MU under = hn::FirstN(du, 0), sub = under;
    if (p.often_small || !hn::AllFalse(du, below)) {
      const VU small = p.flush ? kZeroU
                               : hn::BitCast(du, hn::Sub(hn::Add(hn::BitCast(df, a), kMagic), kMagic));
      mag = hn::IfThenElse(below, small, mag);
      small_stats(a, mag, hn::Eq(mag, kZeroU), under, sub);
    }
    const VU res = hn::Or(mag, p.signed_zero ? sign : hn::IfThenZeroElse(hn::Eq(mag, kZeroU), sign));
    const MU over = hn::RebindMask(du, hn::Gt(hn::BitCast(di, mag), kMax));
    return finish.template operator()<kTail>(u, sign, a, mag, res, over, under, sub, valid);
  };

  // Stochastic rounding with a fixed number of dropped bits at and above 2^emin; below it (one
  // quantum, 2^q) kept and the dropped fraction come exactly from float arithmetic on |x| / 2^q:
  // the truncating conversion gives kept, and the fraction converts 16 bits at a time.
  auto stochastic = [&]<bool kTail>(VU u, uint32_t idx, MU valid) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    const VU sign = hn::And(u, kSign);
    const VU a = hn::Xor(u, sign);
    const MU below = hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), kFlushBelow));
    const bool any_below = p.often_small || !hn::AllFalse(du, below);
    if (any_below && !p.sr_small_float) return general.template operator()<kTail>(u, idx, valid);
    VU frac = a << kFracShift;
    VU kept_small = kZeroU;
    if (any_below) {
      const auto z = hn::Mul(hn::BitCast(df, a), kInvQuantum);
      const VI ki = hn::ConvertTo(di, z);
      const auto h = hn::Mul(hn::Sub(z, hn::ConvertTo(df, ki)), k2p16);
      const VI hi = hn::ConvertTo(di, h);
      const VI lo = hn::ConvertTo(di, hn::Mul(hn::Sub(h, hn::ConvertTo(df, hi)), k2p16));
      frac = hn::IfThenElse(below, hn::BitCast(du, hn::Or(hn::ShiftLeft<16>(hi), lo)), frac);
      kept_small = hn::BitCast(du, ki);
    }
    const VI fk = hn::BitCast(di, hn::Xor(hn::And(frac, kSrMask), kSign));
    const VI rk = hn::BitCast(di, hn::Xor(hn::And(random_bits(idx), kSrMask), kSign));
    const VU up = hn::VecFromMask(du, hn::RebindMask(du, hn::Gt(fk, rk)));
    VU mag = hn::Add(hn::AndNot(kDropMask, a), hn::And(up, kDropUnit));
    MU under = hn::FirstN(du, 0), sub = under;
    if (any_below) {
      const VU rounded = hn::Sub(kept_small, up);
      const VU small = p.flush ? kZeroU
                               : hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, rounded)), kQuantumF));
      mag = hn::IfThenElse(below, small, mag);
      small_stats(a, mag, hn::Eq(mag, kZeroU), under, sub);
    }
    const VU res = hn::Or(mag, p.signed_zero ? sign : hn::IfThenZeroElse(hn::Eq(mag, kZeroU), sign));
    const MU over = hn::RebindMask(du, hn::Gt(hn::BitCast(di, mag), kMax));
    return finish.template operator()<kTail>(u, sign, a, mag, res, over, under, sub, valid);
  };

  auto step = [&]<bool kTail>(VU u, uint32_t idx, MU valid) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    if constexpr (M == Rounding::kNearestEven) {
      if (p.fixed_drop) return nearest_even.template operator()<kTail>(u, idx, valid);
    }
    if constexpr (M == Rounding::kStochastic) {
      if (p.fixed_drop) return stochastic.template operator()<kTail>(u, idx, valid);
    }
    return general.template operator()<kTail>(u, idx, valid);
  };

  const MU all = hn::FirstN(du, N);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VU u = hn::BitCast(du, source(i, N));
    sink(i, hn::BitCast(df, step.template operator()<false>(u, idx0 + static_cast<uint32_t>(i), all)), N);
  }
  if (i < n) {  // the tail goes through the same code, padded with zeros
    const size_t rest = n - i;
    const VU u = hn::BitCast(du, source(i, rest));
    sink(i, hn::BitCast(df, step.template operator()<true>(u, idx0 + static_cast<uint32_t>(i), hn::FirstN(du, rest))), rest);
  }
  if constexpr (kStats) {
    counts[0] += hn::GetLane(hn::SumOfLanes(du, c_inexact));
    counts[1] += hn::GetLane(hn::SumOfLanes(du, c_under));
    counts[2] += hn::GetLane(hn::SumOfLanes(du, c_sub));
    const uint64_t away_over = hn::GetLane(hn::SumOfLanes(du, c_over));
    counts[3] += n_over + away_over;
    counts[4] += n_sat + (p.overflow_nonfinite ? 0 : away_over);
    counts[5] += n_nan + (p.overflow_nonfinite && p.overflow_is_nan ? away_over : 0);
  }
}

// RoundRun with the rounding mode of p.
template <bool kStats, class Source, class Sink>
HWY_INLINE void RoundAnyMode(const F32Plan& p, uint32_t k0, uint32_t k1, size_t n, uint32_t idx0, Counts& c,
                             Source&& src, Sink&& sink) {
  switch (p.rounding) {
    case Rounding::kNearestEven: return RoundRun<Rounding::kNearestEven, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kNearestAway: return RoundRun<Rounding::kNearestAway, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kTowardZero: return RoundRun<Rounding::kTowardZero, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kUp: return RoundRun<Rounding::kUp, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kDown: return RoundRun<Rounding::kDown, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kOdd: return RoundRun<Rounding::kOdd, kStats>(p, k0, k1, n, idx0, c, src, sink);
    case Rounding::kStochastic: return RoundRun<Rounding::kStochastic, kStats>(p, k0, k1, n, idx0, c, src, sink);
    // Never planned: make_f32_plan leaves the P3109 stochastic variants to the scalar path.
    case Rounding::kStochasticA:
    case Rounding::kStochasticB:
    case Rounding::kStochasticC: return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace precsim
HWY_AFTER_NAMESPACE();

#endif  // PRECSIM_FORMATS_QUANTIZE_F32_ROUND_INL_H_

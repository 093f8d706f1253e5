// The vectorised pieces of block scaling (Google Highway, every x86 target, picked at run time):
// block maxima, MX and NVFP4 scales, and the element pass (scale, round, decode) of one tile.
// The rounding itself is the float32 quantize kernel (quantize_f32_span), so every rounding mode,
// stochastic included, is the one the scalar path uses. block_fused.cpp cuts arrays into tiles;
// the constants are described in block_kernel.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/block_fused_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "block_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace precsim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;
constexpr uint32_t kNanBits = 0x7fc00000u;

inline uint32_t mag_bits(float x) { return std::bit_cast<uint32_t>(x) & kAbsMask; }

// Largest |x| bits of n floats: finite magnitudes order like their bits and NaN and Inf lie
// above, so one unsigned max finds amax and flags a non-finite value.
inline uint32_t run_max(const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t N = hn::Lanes(df);
  const auto abs = hn::Set(du, kAbsMask);
  auto m = hn::Zero(du);
  size_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::And(hn::BitCast(du, hn::LoadU(df, x + i)), abs));
  uint32_t r = hn::GetLane(hn::MaxOfLanes(du, m));
  for (; i < n; ++i) r = std::max(r, mag_bits(x[i]));
  return r;
}

HWY_NOINLINE void TileAmax(const BlockKernelParams& p, const float* in, size_t r0, size_t r1,
                           size_t c0, size_t c1, uint32_t* amax) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t N = hn::Lanes(df);
  const auto abs = hn::Set(du, kAbsMask);
  for (size_t r = r0; r < r1; ++r) {
    const float* x = in + r * p.cols;
    uint32_t* a = amax + (r / p.br) * p.nbc;
    if (p.bc == 1) {  // a block per column: the maxima of a row are a contiguous array
      size_t c = c0;
      for (; c + N <= c1; c += N) {
        const auto m = hn::And(hn::BitCast(du, hn::LoadU(df, x + c)), abs);
        hn::StoreU(hn::Max(hn::LoadU(du, a + c), m), du, a + c);
      }
      for (; c < c1; ++c) a[c] = std::max(a[c], mag_bits(x[c]));
      continue;
    }
    for (size_t b = c0 / p.bc; b * p.bc < c1; ++b) {
      const size_t s0 = std::max(c0, b * p.bc), s1 = std::min(c1, b * p.bc + p.bc);
      a[b] = std::max(a[b], run_max(x + s0, s1 - s0));
    }
  }
}

// OCP MX E8M0 scales (block_plan.cpp mx_scale, the reference): amax = 1.frac * 2^E (subnormal
// amax normalised through an exact int-to-float conversion), e by the rule, clamped to
// [-127, 127]; enc = 2^-e, dec = 2^(e + element_exp), both exact floats (subnormal at the ends).
// A block holding NaN or Inf gets enc 0 and dec NaN; an all-zero block e = -127.
template <class DI>
HWY_INLINE void MxScaleVec(const BlockKernelParams& p, DI di, const uint32_t* amax, float* enc, float* dec) {
  const hn::RebindToFloat<DI> df;
  const hn::RebindToUnsigned<DI> du;
  const auto a = hn::BitCast(di, hn::LoadU(du, amax));
  const auto frac_mask = hn::Set(di, 0x7fffff);
  const auto nonfinite = hn::Gt(a, hn::Set(di, 0x7f7fffff));
  const auto sub = hn::Lt(a, hn::Set(di, 0x00800000));
  const auto lead = hn::BitCast(di, hn::ConvertTo(df, a));  // exact where a is subnormal
  const auto E = hn::IfThenElse(sub, hn::Sub(hn::ShiftRight<23>(lead), hn::Set(di, 127 + 149)),
                                hn::Sub(hn::ShiftRight<23>(a), hn::Set(di, 127)));
  const auto frac = hn::And(hn::IfThenElse(sub, lead, a), frac_mask);
  auto e = hn::Sub(E, hn::Set(di, p.emax));
  // A true mask is -1: subtracting it adds one.
  if (p.rule == ScaleRule::kCeil) e = hn::Sub(e, hn::VecFromMask(di, hn::Ne(frac, hn::Zero(di))));
  if (p.rule == ScaleRule::kEven)
    e = hn::Sub(e, hn::VecFromMask(di, hn::Gt(frac, hn::Set(di, static_cast<int32_t>(p.even_frac) - 1))));
  if (p.rule == ScaleRule::kRceil)
    e = hn::Sub(e, hn::VecFromMask(di, hn::Gt(frac, hn::Set(di, static_cast<int32_t>(p.rceil_frac)))));
  e = hn::IfThenElse(hn::Eq(a, hn::Zero(di)), hn::Set(di, -127), e);
  e = hn::Min(hn::Max(e, hn::Set(di, -127)), hn::Set(di, 127));
  // 2^k as float bits for k in [-149, 127].
  auto pow2 = [&](decltype(e) k) HWY_ATTR {
    const auto normal = hn::ShiftLeft<23>(hn::Add(k, hn::Set(di, 127)));
    const auto shift = hn::Min(hn::Max(hn::Add(k, hn::Set(di, 149)), hn::Zero(di)), hn::Set(di, 22));
    const auto subnormal = hn::BitCast(di, hn::Set(du, 1u) << hn::BitCast(du, shift));
    return hn::IfThenElse(hn::Gt(k, hn::Set(di, -127)), normal, subnormal);
  };
  const auto enc_bits = hn::IfThenZeroElse(nonfinite, pow2(hn::Neg(e)));
  const auto dec_bits = hn::IfThenElse(nonfinite, hn::Set(di, static_cast<int32_t>(kNanBits)),
                                       pow2(hn::Add(e, hn::Set(di, p.element_exp))));
  hn::StoreU(hn::BitCast(df, enc_bits), df, enc);
  hn::StoreU(hn::BitCast(df, dec_bits), df, dec);
}

// NVFP4 (block_plan.cpp nvfp4_scale): the E4M3 block scale sv = RNE_sat(amax / 6 * s_enc), all
// in FP32; enc = 1 / (sv * s_dec); a zero sv gives enc 0 and dec 0, a non-finite block enc 0
// and dec NaN. dec holds sv; the tensor scale multiplies in the element pass.
HWY_INLINE void NvScales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t N = hn::Lanes(df);
  constexpr size_t kPiece = 256;
  HWY_ALIGN float sv[kPiece + hn::MaxLanes(df)];
  HWY_ALIGN uint32_t pad[hn::MaxLanes(df)];
  for (size_t i0 = 0; i0 < n; i0 += kPiece) {
    const size_t m = std::min(kPiece, n - i0);
    const size_t mv = (m + N - 1) / N * N;
    auto load_amax = [&](size_t i) HWY_ATTR {
      if (i0 + i + N <= n) return hn::LoadU(di, reinterpret_cast<const int32_t*>(amax + i0 + i));
      for (size_t j = 0; j < N; ++j) pad[j] = i0 + i + j < n ? amax[i0 + i + j] : 0;
      return hn::Load(di, reinterpret_cast<const int32_t*>(pad));
    };
    for (size_t i = 0; i < mv; i += N) {
      const auto a = load_amax(i);
      const auto nonfinite = hn::RebindMask(df, hn::Gt(a, hn::Set(di, 0x7f7fffff)));
      const auto x = hn::Mul(hn::Div(hn::BitCast(df, a), hn::Set(df, 6.0f)), hn::Set(df, p.tensor_enc));
      hn::Store(hn::IfThenZeroElse(nonfinite, x), df, sv + i);
    }
    quantize_f32_span(*p.scale_plan, SrKey{}, sv, sv, m, nullptr, 0);
    for (size_t i = 0; i < mv; i += N) {
      const auto a = load_amax(i);
      const auto nonfinite = hn::RebindMask(df, hn::Gt(a, hn::Set(di, 0x7f7fffff)));
      const auto s = hn::Load(df, sv + i);
      const auto zero = hn::Or(nonfinite, hn::Eq(s, hn::Zero(df)));
      const auto e = hn::IfThenZeroElse(zero, hn::Div(hn::Set(df, 1.0f), hn::Mul(s, hn::Set(df, p.tensor_dec))));
      const auto d = hn::IfThenElse(nonfinite, hn::BitCast(df, hn::Set(di, static_cast<int32_t>(kNanBits))), s);
      const size_t k = std::min(N, m - std::min(m, i));
      HWY_ALIGN float eb[hn::MaxLanes(df)], db[hn::MaxLanes(df)];
      hn::Store(e, df, eb);
      hn::Store(d, df, db);
      std::copy_n(eb, k, enc + i0 + i);
      std::copy_n(db, k, dec + i0 + i);
    }
  }
}

HWY_NOINLINE void Scales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec) {
  if (p.rule == ScaleRule::kNvfp4) return NvScales(p, amax, n, enc, dec);
  const hn::ScalableTag<int32_t> di;
  const size_t N = hn::Lanes(di);
  size_t i = 0;
  for (; i + N <= n; i += N) MxScaleVec(p, di, amax + i, enc + i, dec + i);
  if (i < n) {  // the tail through the same code on a padded copy
    HWY_ALIGN uint32_t a[hn::MaxLanes(di)] = {};
    HWY_ALIGN float e[hn::MaxLanes(di)], d[hn::MaxLanes(di)];
    std::copy(amax + i, amax + n, a);
    MxScaleVec(p, di, a, e, d);
    std::copy_n(e, n - i, enc + i);
    std::copy_n(d, n - i, dec + i);
  }
}

// Calls fn(b, s0, s1) for each part [s0, s1) of the columns [c0, c1) that lies in block column b.
template <typename Fn>
HWY_INLINE void for_segments(const BlockKernelParams& p, size_t c0, size_t c1, Fn&& fn) {
  for (size_t b = c0 / p.bc; b * p.bc < c1; ++b) fn(b, std::max(c0, b * p.bc), std::min(c1, b * p.bc + p.bc));
}

// y = (x * enc) * elem_factor for one row, with the count of |y| above the largest element.
HWY_INLINE uint64_t ScaleRow(const BlockKernelParams& p, const float* x, const float* e, float* y, size_t c0,
                             size_t c1, bool count) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const auto f = hn::Set(df, p.elem_factor);
  const auto lim = hn::Set(df, p.elem_max_below);
  const bool mul_f = p.elem_factor != 1.0f;
  uint64_t sat = 0;
  auto run = [&](auto encv, float es, size_t s0, size_t s1, bool per_column) HWY_ATTR {
    size_t c = s0;
    for (; c + N <= s1; c += N) {
      auto v = hn::Mul(hn::LoadU(df, x + c), per_column ? hn::LoadU(df, e + c) : encv);
      if (mul_f) v = hn::Mul(v, f);
      if (count) sat += hn::CountTrue(df, hn::Gt(hn::Abs(v), lim));
      hn::StoreU(v, df, y + c - c0);
    }
    for (; c < s1; ++c) {
      float v = x[c] * (per_column ? e[c] : es);
      if (mul_f) v = v * p.elem_factor;
      sat += count && std::fabs(v) > p.elem_max_below;
      y[c - c0] = v;
    }
  };
  if (p.bc == 1) run(hn::Zero(df), 0.0f, c0, c1, true);
  else for_segments(p, c0, c1, [&](size_t b, size_t s0, size_t s1) HWY_ATTR { run(hn::Set(df, e[b]), e[b], s0, s1, false); });
  return sat;
}

// out = y * dec (NVFP4: (y * dec) * tensor_dec) for one row; with `count`, the non-finite inputs
// and the finite non-zero inputs that became zero (x is read before out, which may alias it).
HWY_INLINE void DecodeRow(const BlockKernelParams& p, const float* x, const float* d, const float* y, float* o,
                          size_t c0, size_t c1, bool count, BlockPassCounts& k) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> du;  // magnitudes fit in 31 bits
  const size_t N = hn::Lanes(df);
  const bool nv = p.rule == ScaleRule::kNvfp4;
  const auto td = hn::Set(df, p.tensor_dec);
  const auto abs = hn::Set(du, static_cast<int32_t>(kAbsMask));
  const auto inf = hn::Set(du, static_cast<int32_t>(kInfBits));
  auto run = [&](auto decv, float ds, size_t s0, size_t s1, bool per_column) HWY_ATTR {
    size_t c = s0;
    for (; c + N <= s1; c += N) {
      auto v = hn::Mul(hn::LoadU(df, y + c - c0), per_column ? hn::LoadU(df, d + c) : decv);
      if (nv) v = hn::Mul(v, td);
      if (count) {
        const auto xa = hn::And(hn::BitCast(du, hn::LoadU(df, x + c)), abs);
        const auto finite = hn::Lt(xa, inf);
        k.nonfinite += N - hn::CountTrue(du, finite);
        const auto fl = hn::And(hn::AndNot(hn::Eq(xa, hn::Zero(du)), finite),
                                hn::RebindMask(du, hn::Eq(v, hn::Zero(df))));
        k.flushed += hn::CountTrue(du, fl);
      }
      hn::StoreU(v, df, o + c);
    }
    for (; c < s1; ++c) {
      float v = y[c - c0] * (per_column ? d[c] : ds);
      if (nv) v = v * p.tensor_dec;
      if (count) {
        const uint32_t xa = mag_bits(x[c]);
        k.nonfinite += xa >= kInfBits;
        k.flushed += xa < kInfBits && xa != 0 && v == 0;
      }
      o[c] = v;
    }
  };
  if (p.bc == 1) run(hn::Zero(df), 0.0f, c0, c1, true);
  else for_segments(p, c0, c1, [&](size_t b, size_t s0, size_t s1) HWY_ATTR { run(hn::Set(df, d[b]), d[b], s0, s1, false); });
}

HWY_NOINLINE void TileQuantize(const BlockKernelParams& p, const float* in, float* out, size_t r0, size_t r1,
                               size_t c0, size_t c1, const float* enc, const float* dec, float* buf,
                               BlockPassCounts* counts) {
  const size_t w = c1 - c0;
  const bool count = counts != nullptr;
  BlockPassCounts k;
  for (size_t r = r0; r < r1; ++r)
    k.saturated += ScaleRow(p, in + r * p.cols, enc + (r / p.br) * p.nbc, buf + (r - r0) * w, c0, c1, count);
  // Element i of the array draws stochastic-rounding bits at index_base + i: one call when the
  // tile is contiguous in the array or the rounding draws none.
  if (!p.stochastic || w == p.cols) {
    quantize_f32_span(*p.plan, p.sr_key, buf, buf, (r1 - r0) * w, nullptr, p.index_base + r0 * p.cols + c0);
  } else {
    for (size_t r = r0; r < r1; ++r)
      quantize_f32_span(*p.plan, p.sr_key, buf + (r - r0) * w, buf + (r - r0) * w, w, nullptr,
                        p.index_base + r * p.cols + c0);
  }
  for (size_t r = r0; r < r1; ++r)
    DecodeRow(p, in + r * p.cols, dec + (r / p.br) * p.nbc, buf + (r - r0) * w, out + r * p.cols, c0, c1, count, k);
  if (counts) {
    counts->saturated += k.saturated;
    counts->flushed += k.flushed;
    counts->nonfinite += k.nonfinite;
  }
}

HWY_NOINLINE uint32_t FiniteAmax(const float* in, size_t n) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  const size_t N = hn::Lanes(di);
  const auto abs = hn::Set(di, static_cast<int32_t>(kAbsMask));
  const auto last = hn::Set(di, 0x7f7fffff);
  auto m = hn::Zero(di);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto a = hn::And(hn::BitCast(di, hn::LoadU(df, in + i)), abs);
    m = hn::Max(m, hn::IfThenZeroElse(hn::Gt(a, last), a));
  }
  uint32_t r = static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
  for (; i < n; ++i) {
    const uint32_t a = mag_bits(in[i]);
    if (a < kInfBits) r = std::max(r, a);
  }
  return r;
}

}  // namespace HWY_NAMESPACE
}  // namespace precsim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace precsim {

HWY_EXPORT(TileAmax);
HWY_EXPORT(Scales);
HWY_EXPORT(TileQuantize);
HWY_EXPORT(FiniteAmax);

void block_tile_amax(const BlockKernelParams& p, const float* in, size_t r0, size_t r1, size_t c0,
                     size_t c1, uint32_t* amax) {
  HWY_DYNAMIC_DISPATCH(TileAmax)(p, in, r0, r1, c0, c1, amax);
}

void block_scales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec) {
  HWY_DYNAMIC_DISPATCH(Scales)(p, amax, n, enc, dec);
}

void block_tile_quantize(const BlockKernelParams& p, const float* in, float* out, size_t r0, size_t r1,
                         size_t c0, size_t c1, const float* enc, const float* dec, float* buf,
                         BlockPassCounts* counts) {
  HWY_DYNAMIC_DISPATCH(TileQuantize)(p, in, out, r0, r1, c0, c1, enc, dec, buf, counts);
}

uint32_t finite_amax_bits(const float* in, size_t n) { return HWY_DYNAMIC_DISPATCH(FiniteAmax)(in, n); }

}  // namespace precsim
#endif  // HWY_ONCE

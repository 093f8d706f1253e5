// The vectorised pieces of block scaling (Google Highway, every x86 target, picked at run time):
// block maxima, MX and NVFP4 scales, and the element pass of one tile, which scales, rounds and
// decodes each vector in registers. The rounding is the float32 quantize kernel's own
// (quantize_f32_round-inl.h), so every rounding mode, stochastic included, is the one the scalar
// path uses. block_fused.cpp cuts arrays into tiles; the constants are described in block_kernel.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/block_fused_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "block_kernel.h"
#include "precsim/formats/sr_bits.h"
#include "quantize_f32_round-inl.h"

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

// count floats from p (count <= lanes), zeros beyond.
template <class D>
HWY_INLINE hn::Vec<D> LoadPart(D d, const float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::LoadU(d, p);
  HWY_ALIGN float b[hn::MaxLanes(d)] = {};
  std::copy_n(p, count, b);
  return hn::Load(d, b);
}

// One row of a tile, columns c0 .. c0 + w: x * enc (* elem_factor) rounded in registers by the
// quantize kernel's rounding and decoded with dec, straight into out. kPerBlock: e and d are the
// scales of the row's blocks, 2^shift columns each, and no vector straddles two blocks; otherwise
// they hold a scale per column.
template <bool kPerBlock>
HWY_INLINE void QuantizeRow(const BlockKernelParams& p, const float* x, const float* e, const float* d, float* o,
                            size_t c0, size_t w, int shift, uint64_t index, bool count, BlockPassCounts& k) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;  // magnitudes fit in 31 bits
  const size_t N = hn::Lanes(df);
  const auto f = hn::Set(df, p.elem_factor);
  const auto lim = hn::Set(df, p.elem_max_below);
  const auto td = hn::Set(df, p.tensor_dec);
  const auto abs = hn::Set(di, static_cast<int32_t>(kAbsMask));
  const auto inf = hn::Set(di, static_cast<int32_t>(kInfBits));
  const bool mul_f = p.elem_factor != 1.0f, nv = p.rule == ScaleRule::kNvfp4;
  size_t off = 0;  // of the current piece of the row
  auto source = [&](size_t i, size_t n) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    const auto ev = kPerBlock ? hn::Set(df, e[(c0 + off + i) >> shift]) : LoadPart(df, e + off + i, n);
    auto v = hn::Mul(LoadPart(df, x + off + i, n), ev);
    if (mul_f) v = hn::Mul(v, f);
    if (count) k.saturated += hn::CountTrue(df, hn::Gt(hn::Abs(v), lim));
    return v;
  };
  auto sink = [&](size_t i, hn::Vec<decltype(df)> q, size_t n) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    auto v = q;
    if (p.decode) {
      v = hn::Mul(q, kPerBlock ? hn::Set(df, d[(c0 + off + i) >> shift]) : LoadPart(df, d + off + i, n));
      if (nv) v = hn::Mul(v, td);
    }
    if (count) {  // x is read before out, which may alias it, is written
      const auto xa = hn::And(hn::BitCast(di, LoadPart(df, x + off + i, n)), abs);
      const auto finite = hn::Lt(xa, inf);
      k.nonfinite += n - hn::CountTrue(di, hn::And(finite, hn::FirstN(di, n)));
      const auto fl = hn::And(hn::AndNot(hn::Eq(xa, hn::Zero(di)), finite), hn::RebindMask(di, hn::Eq(v, hn::Zero(df))));
      k.flushed += hn::CountTrue(di, fl);
    }
    if (n == N) return hn::StoreU(v, df, o + off + i);
    HWY_ALIGN float b[hn::MaxLanes(df)];
    hn::Store(v, df, b);
    std::copy_n(b, n, o + off + i);
  };
  Counts unused{};
  // Stochastic-rounding bits of element i come from index + i; the stream changes at multiples of
  // 2^32 (as in quantize_f32_span).
  while (off < w) {
    const uint64_t at = index + off;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(w - off, (uint64_t{1} << 32) - (at & 0xffffffffu)));
    uint32_t k0 = 0, k1 = 0;
    if (p.stochastic) {
      const SrStream st = make_sr_stream(p.sr_key, at >> 32);
      k0 = st.k0, k1 = st.k1;
    }
    RoundAnyMode<false>(*p.plan, k0, k1, len, static_cast<uint32_t>(at), unused, source, sink);
    off += len;
  }
}

HWY_NOINLINE void TileQuantize(const BlockKernelParams& p, const float* in, float* out, size_t r0, size_t r1,
                               size_t c0, size_t c1, const float* enc, const float* dec, float* buf,
                               BlockPassCounts* counts) {
  const size_t w = c1 - c0;
  BlockPassCounts k;
  float* e_col = buf;
  float* d_col = buf + w;
  // Blocks of 2^shift columns, a whole number of vectors, starting on a vector: one broadcast
  // scale per vector.
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const bool pow2 = (p.bc & (p.bc - 1)) == 0;
  const bool per_block = p.bc > 1 && pow2 && p.bc % N == 0 && c0 % N == 0;
  const int shift = per_block ? hwy::Num0BitsBelowLS1Bit_Nonzero64(p.bc) : 0;
  for (size_t r = r0; r < r1; ++r) {
    const size_t rb = r / p.br;
    const float* x = in + r * p.cols + c0;
    float* o = out + r * p.cols + c0;
    const uint64_t index = p.index_base + r * p.cols + c0;
    if (per_block) {
      QuantizeRow<true>(p, x, enc + rb * p.nbc, dec + rb * p.nbc, o, c0, w, shift, index, counts != nullptr, k);
      continue;
    }
    const float* e = enc + rb * p.nbc + c0;  // a block per column: the scales are per column already
    const float* d = dec + rb * p.nbc + c0;
    if (p.bc != 1) {
      if (r == r0 || r % p.br == 0) {  // the block-row's scales spread over its columns
        for (size_t b = c0 / p.bc; b * p.bc < c1; ++b) {
          const size_t s0 = std::max(c0, b * p.bc) - c0, s1 = std::min(c1, b * p.bc + p.bc) - c0;
          std::fill(e_col + s0, e_col + s1, enc[rb * p.nbc + b]);
          std::fill(d_col + s0, d_col + s1, dec[rb * p.nbc + b]);
        }
      }
      e = e_col, d = d_col;
    }
    QuantizeRow<false>(p, x, e, d, o, c0, w, 0, index, counts != nullptr, k);
  }
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

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
#include <cstring>
#include <vector>

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

HWY_NOINLINE void TileAmax(const BlockKernelParams& p, const float* in, size_t r0, size_t r1,
                           size_t c0, size_t c1, uint32_t* amax) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t N = hn::Lanes(df);
  const auto abs = hn::Set(du, kAbsMask);
  if (p.bc == 1) {  // a block per column: the maxima of a row are a contiguous array
    for (size_t r = r0; r < r1; ++r) {
      const float* x = in + r * p.cols;
      uint32_t* a = amax + (r / p.br) * p.nbc;
      size_t c = c0;
      for (; c + N <= c1; c += N) {
        const auto m = hn::And(hn::BitCast(du, hn::LoadU(df, x + c)), abs);
        hn::StoreU(hn::Max(hn::LoadU(du, a + c), m), du, a + c);
      }
      for (; c < c1; ++c) a[c] = std::max(a[c], mag_bits(x[c]));
    }
    return;
  }
  // Rows in order (the input streams from memory), one cross-lane reduction per block and row, or
  // per block where a block has several rows: their column maxima first.
  thread_local std::vector<uint32_t> column_max;
  uint32_t* m = nullptr;
  if (p.br > 1) {
    column_max.resize(c1 - c0);
    m = column_max.data();
  }
  for (size_t r = r0; r < r1;) {
    const size_t r_end = p.br > 1 ? std::min(r1, (r / p.br + 1) * p.br) : r + 1;
    const float* x = in + r * p.cols + c0;
    if (m) {
      std::fill_n(m, c1 - c0, 0u);
      for (size_t rr = r; rr < r_end; ++rr) {
        const float* y = in + rr * p.cols + c0;
        size_t c = 0;
        for (; c + N <= c1 - c0; c += N)
          hn::StoreU(hn::Max(hn::LoadU(du, m + c), hn::And(hn::BitCast(du, hn::LoadU(df, y + c)), abs)), du, m + c);
        for (; c < c1 - c0; ++c) m[c] = std::max(m[c], mag_bits(y[c]));
      }
    }
    auto mags = [&](size_t c) HWY_ATTR { return m ? hn::LoadU(du, m + c) : hn::And(hn::BitCast(du, hn::LoadU(df, x + c)), abs); };
    uint32_t* a = amax + (r / p.br) * p.nbc;
    for (size_t b = c0 / p.bc; b * p.bc < c1; ++b) {
      const size_t s0 = std::max(c0, b * p.bc) - c0, s1 = std::min(c1, b * p.bc + p.bc) - c0;
      auto v = hn::Zero(du);
      uint32_t t = 0;
      size_t c = s0;
      for (; c + N <= s1; c += N) v = hn::Max(v, mags(c));
      for (; c < s1; ++c) t = std::max(t, m ? m[c] : mag_bits(x[c]));
      a[b] = std::max({a[b], t, static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(du, v)))});
    }
    r = r_end;
  }
}

// OCP MX E8M0 scales (block_plan.cpp mx_scale, the reference) of the block maxima a (|x| bits):
// amax = 1.frac * 2^E (subnormal amax normalised through an exact int-to-float conversion), e by
// the rule, clamped to [-127, 127]; enc = 2^-e, dec = 2^(e + element_exp), both exact floats
// (subnormal at the ends). A block holding NaN or Inf gets enc 0 and dec NaN; an all-zero block
// e = -127.
template <class DI, class VF = hn::Vec<hn::RebindToFloat<DI>>>
HWY_INLINE void MxScale(const BlockKernelParams& p, DI di, hn::Vec<DI> a, VF& enc, VF& dec) {
  const hn::RebindToFloat<DI> df;
  const hn::RebindToUnsigned<DI> du;
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
  enc = hn::BitCast(df, hn::IfThenZeroElse(nonfinite, pow2(hn::Neg(e))));
  dec = hn::BitCast(df, hn::IfThenElse(nonfinite, hn::Set(di, static_cast<int32_t>(kNanBits)),
                                       pow2(hn::Add(e, hn::Set(di, p.element_exp)))));
}

// NVFP4 (block_plan.cpp nvfp4_scale): the E4M3 block scale sv = RNE_sat(amax / 6 * s_enc), all
// in FP32; enc = 1 / (sv * s_dec); a zero sv gives enc 0 and dec 0, a non-finite block enc 0
// and dec NaN. dec holds sv; the tensor scale multiplies in the element pass. NvScaleInput is
// what the E4M3 rounding takes (0 for a non-finite block), NvScaleOutput makes enc and dec of
// its result; NvScale does the three for one vector.
template <class DI>
HWY_INLINE hn::Vec<hn::RebindToFloat<DI>> NvScaleInput(const BlockKernelParams& p, DI di, hn::Vec<DI> a) {
  const hn::RebindToFloat<DI> df;
  const auto nonfinite = hn::RebindMask(df, hn::Gt(a, hn::Set(di, 0x7f7fffff)));
  return hn::IfThenZeroElse(nonfinite, hn::Mul(hn::Div(hn::BitCast(df, a), hn::Set(df, 6.0f)), hn::Set(df, p.tensor_enc)));
}

template <class DI, class VF = hn::Vec<hn::RebindToFloat<DI>>>
HWY_INLINE void NvScaleOutput(const BlockKernelParams& p, DI di, hn::Vec<DI> a, VF s, VF& enc, VF& dec) {
  const hn::RebindToFloat<DI> df;
  const auto nonfinite = hn::RebindMask(df, hn::Gt(a, hn::Set(di, 0x7f7fffff)));
  const auto zero = hn::Or(nonfinite, hn::Eq(s, hn::Zero(df)));
  enc = hn::IfThenZeroElse(zero, hn::Div(hn::Set(df, 1.0f), hn::Mul(s, hn::Set(df, p.tensor_dec))));
  dec = hn::IfThenElse(nonfinite, hn::BitCast(df, hn::Set(di, static_cast<int32_t>(kNanBits))), s);
}

template <class DI, class VF = hn::Vec<hn::RebindToFloat<DI>>>
HWY_INLINE void NvScale(const BlockKernelParams& p, DI di, hn::Vec<DI> a, VF& enc, VF& dec) {
  const auto x = NvScaleInput(p, di, a);
  VF s = hn::Zero(hn::RebindToFloat<DI>());
  Counts unused{};
  // The scale plan is E4M3 with nearest-even rounding and saturation (block_fused.cpp).
  RoundRun<Rounding::kNearestEven, false>(
      *p.scale_plan, 0, 0, hn::Lanes(di), 0, unused, [&](size_t, size_t) HWY_ATTR PRECSIM_INLINE_LAMBDA { return x; },
      [&](size_t, VF r, size_t) HWY_ATTR PRECSIM_INLINE_LAMBDA { s = r; });
  NvScaleOutput(p, di, a, s, enc, dec);
}

template <class DI, class VF = hn::Vec<hn::RebindToFloat<DI>>>
HWY_INLINE void BlockScale(const BlockKernelParams& p, DI di, hn::Vec<DI> a, VF& enc, VF& dec) {
  if (p.rule == ScaleRule::kNvfp4) NvScale(p, di, a, enc, dec);
  else MxScale(p, di, a, enc, dec);
}

// NVFP4's scales go through one rounding run over the whole array, so that the E4M3 rounding's
// constants are set once rather than per vector.
HWY_NOINLINE void Scales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  using VF = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(di);
  auto load = [&](size_t i, size_t count) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    if (count == N) return hn::LoadU(di, reinterpret_cast<const int32_t*>(amax + i));
    HWY_ALIGN int32_t a[hn::MaxLanes(di)] = {};  // zeros beyond
    std::copy_n(reinterpret_cast<const int32_t*>(amax + i), std::min(count, hn::MaxLanes(di)), a);
    return hn::Load(di, a);
  };
  if (p.rule == ScaleRule::kNvfp4) {
    Counts unused{};
    RoundRun<Rounding::kNearestEven, false>(
        *p.scale_plan, 0, 0, n, 0, unused,
        [&](size_t i, size_t count) HWY_ATTR PRECSIM_INLINE_LAMBDA { return NvScaleInput(p, di, load(i, count)); },
        [&](size_t i, VF sv, size_t count) HWY_ATTR PRECSIM_INLINE_LAMBDA {
          VF e, d;
          NvScaleOutput(p, di, load(i, count), sv, e, d);
          StorePart(df, e, count, enc + i);
          StorePart(df, d, count, dec + i);
        });
    return;
  }
  for (size_t i = 0; i < n; i += N) {
    const size_t k = std::min(N, n - i);
    VF e, d;
    MxScale(p, di, load(i, k), e, d);
    StorePart(df, e, k, enc + i);
    StorePart(df, d, k, dec + i);
  }
}

// v[0 .. lanes): lane j of the result is the largest lane of v[j]. Pairs of vectors merge into
// one holding the pairwise maxima of each (the lower half from the first), so lanes - 1 merges
// of two permutations and a max replace a cross-lane reduction per vector.
template <class D>
HWY_INLINE hn::Vec<D> LaneMaxima(D d, hn::Vec<D>* v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return v[0];
#else
  for (size_t n = hn::MaxLanes(d); n > 1; n /= 2)
    for (size_t j = 0; j < n / 2; ++j)
      v[j] = hn::Max(hn::ConcatEven(d, v[2 * j + 1], v[2 * j]), hn::ConcatOdd(d, v[2 * j + 1], v[2 * j]));
  return v[0];
#endif
}

// Maxima and scales of the (up to) lanes blocks of bc floats starting at x, of which `avail`
// floats belong to the row, into am, e and d (one entry per block).
// Out of line: once per group, and its vectors would crowd the element loop's registers.
HWY_NOINLINE void GroupScales(const BlockKernelParams& p, const float* x, size_t avail, uint32_t* am, float* e,
                              float* d) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  constexpr size_t N = hn::MaxLanes(di);
  const size_t bc = p.bc;
  const auto abs = hn::Set(di, static_cast<int32_t>(kAbsMask));
  hn::Vec<decltype(di)> m[N];
  if (avail >= N * bc) {
    for (size_t j = 0; j < N; ++j) {
      auto v = hn::And(hn::BitCast(di, hn::LoadU(df, x + j * bc)), abs);
      for (size_t k = N; k < bc; k += N) v = hn::Max(v, hn::And(hn::BitCast(di, hn::LoadU(df, x + j * bc + k)), abs));
      m[j] = v;
    }
  } else {  // the row ends inside the group: zeros beyond it
    for (size_t j = 0; j < N; ++j) {
      m[j] = hn::Zero(di);
      for (size_t k = j * bc; k < j * bc + bc && k < avail; k += N)
        m[j] = hn::Max(m[j], hn::And(hn::BitCast(di, LoadPart(df, x + k, std::min(N, avail - k))), abs));
    }
  }
  const auto a = LaneMaxima(di, m);
  hn::Vec<decltype(df)> ev, dv;
  BlockScale(p, di, a, ev, dv);
  const size_t blocks = std::min(N, (avail + bc - 1) / bc);
  StorePart(di, a, blocks, reinterpret_cast<int32_t*>(am));
  StorePart(df, ev, blocks, e);
  StorePart(df, dv, blocks, d);
}

// Maxima of runs of `len` floats (1-D blocks along rows; len a multiple of 16), a group of lanes
// runs per LaneMaxima.
HWY_NOINLINE void RunAmax(const float* in, size_t runs, size_t len, uint32_t* amax) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  constexpr size_t N = hn::MaxLanes(di);
  static_assert(N <= 16, "a run of 16 is a whole number of vectors");
  const auto abs = hn::Set(di, 0x7fffffff);
  size_t r = 0;
  for (; r + N <= runs; r += N) {
    hn::Vec<decltype(di)> m[N];
    for (size_t j = 0; j < N; ++j) {
      const float* x = in + (r + j) * len;
      auto v = hn::And(hn::BitCast(di, hn::LoadU(df, x)), abs);
      for (size_t c = N; c < len; c += N) v = hn::Max(v, hn::And(hn::BitCast(di, hn::LoadU(df, x + c)), abs));
      m[j] = v;
    }
    hn::StoreU(LaneMaxima(di, m), di, reinterpret_cast<int32_t*>(amax + r));
  }
  for (; r < runs; ++r) {
    uint32_t a = 0;
    for (size_t c = 0; c < len; ++c) a = std::max(a, std::bit_cast<uint32_t>(in[r * len + c]) & 0x7fffffffu);
    amax[r] = a;
  }
}

// The codes of n rounded values q (CodePlan) to out, one byte each; dec is their blocks' decode
// scale, NaN in NaN blocks, whose codes are 0. Lanes left to the scalar encoder (NaN, Inf,
// signed values of unsigned formats) append their flat index (flat0 + lane) to rare.
template <class VF>
HWY_INLINE void StoreCodes(const CodePlan& c, VF q, VF dec, size_t n, const BlockTileIo& io, size_t row,
                           size_t col, size_t flat0) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  const hn::Rebind<uint8_t, decltype(di)> d8;
  const auto u = hn::BitCast(di, q);
  const auto a = hn::And(u, hn::Set(di, static_cast<int32_t>(kAbsMask)));
  const auto neg = hn::Lt(u, hn::Zero(di));
  auto special = hn::Gt(a, hn::Set(di, 0x7f7fffff));
  hn::Vec<decltype(di)> code;
  if (c.is_int) {
    code = hn::ConvertTo(di, q);
  } else {
    const auto normal = hn::Or(hn::ShiftLeftSame(hn::Add(hn::ShiftRight<23>(a), hn::Set(di, c.rebias)), c.man_bits),
                               hn::ShiftRightSame(hn::And(a, hn::Set(di, 0x7fffff)), 23 - c.man_bits));
    const auto sub = hn::ConvertTo(di, hn::Mul(hn::BitCast(df, a), hn::Set(df, c.sub_scale)));
    code = hn::IfThenElse(hn::Lt(a, hn::Set(di, static_cast<int32_t>(c.normal_below))), sub, normal);
    if (c.sign_bit) {
      const auto signed_lane = c.negative_zero ? neg : hn::AndNot(hn::Eq(a, hn::Zero(di)), neg);
      code = hn::IfThenElse(signed_lane, hn::Or(code, hn::Set(di, static_cast<int32_t>(c.sign_bit))), code);
    } else {
      special = hn::Or(special, neg);
    }
  }
  const auto nan_block = hn::RebindMask(di, hn::IsNaN(dec));
  code = hn::IfThenZeroElse(nan_block, hn::And(code, hn::Set(di, static_cast<int32_t>(c.mask))));
  special = hn::And(hn::AndNot(nan_block, special), hn::FirstN(di, n));
  if (!io.code_row_bytes) {
    StorePart(d8, hn::DemoteTo(d8, code), n, io.codes + flat0);
  } else {  // a vector on an odd column first completes the byte its neighbour began
    HWY_ALIGN uint8_t b[hn::MaxLanes(d8) < 16 ? 16 : hn::MaxLanes(d8)];  // whole words for pack_nibble_run
    hn::Store(hn::DemoteTo(d8, code), d8, b);
    uint8_t* o = io.codes + row * io.code_row_bytes + col / 2;
    const size_t odd = col & 1;
    if (odd) *o = static_cast<uint8_t>((*o & 0x0f) | (b[0] << 4));
    pack_nibble_run(b + odd, n - odd, o + odd);
  }
  if (HWY_LIKELY(hn::AllFalse(di, special))) return;
  HWY_ALIGN int32_t lanes[hn::MaxLanes(di)];
  hn::Store(hn::VecFromMask(di, special), di, lanes);
  for (size_t j = 0; j < n; ++j)
    if (lanes[j]) io.rare->push_back(flat0 + j);
}

// One row of a tile, columns c0 .. c0 + w: x * enc (* elem_factor) rounded in registers by the
// quantize kernel's rounding and decoded with dec, straight into out. kPerBlock: e and d are the
// scales of the row's blocks, 2^shift columns each, and no vector straddles two blocks (and with
// am, the maxima and scales of each group of lanes blocks are made here, as the group is
// reached); otherwise they hold a scale per column. ahead: see BlockTileIo.
template <bool kPerBlock, bool kCodes>
HWY_INLINE void QuantizeRow(const BlockKernelParams& p, const BlockTileIo& io, size_t flat, float* e, float* d,
                            uint32_t* am, size_t c0, size_t w, int shift, uint64_t index, BlockPassCounts& k) {
  const float* x = io.in + flat;
  float* o = io.out ? io.out + flat : nullptr;
  const size_t row = flat / p.cols;
  const bool count = io.counts != nullptr;
  const ptrdiff_t ahead = io.ahead;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;  // magnitudes fit in 31 bits
  const size_t N = hn::Lanes(df);
  const auto f = hn::Set(df, p.elem_factor);
  const auto lim = hn::Set(df, p.elem_max_below);
  const auto td = hn::Set(df, p.tensor_dec);
  const auto abs = hn::Set(di, static_cast<int32_t>(kAbsMask));
  const auto inf = hn::Set(di, static_cast<int32_t>(kInfBits));
  const bool mul_f = p.elem_factor != 1.0f, nv = p.rule == ScaleRule::kNvfp4;
  const size_t group_mask = (N << shift) - 1;  // columns of lanes blocks
  size_t off = 0;  // of the current piece of the row
  auto source = [&](size_t i, size_t n) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    const size_t col = off + i;
    if (kPerBlock && am && (col & group_mask) == 0) {
      const size_t b = (c0 + col) >> shift;
      GroupScales(p, x + col, w - col, am + b, e + b, d + b);
    }
    if (ahead) {  // into L2, as an address: the next tile may be shorter than this one
      const uintptr_t at = reinterpret_cast<uintptr_t>(x + col) + static_cast<uintptr_t>(ahead) * sizeof(float);
      __builtin_prefetch(reinterpret_cast<const void*>(at), 0, 2);
    }
    const auto ev = kPerBlock ? hn::Set(df, e[(c0 + col) >> shift]) : LoadPart(df, e + col, n);
    auto v = hn::Mul(LoadPart(df, x + col, n), ev);
    if (mul_f) v = hn::Mul(v, f);
    if (count) k.saturated += hn::CountTrue(df, hn::Gt(hn::Abs(v), lim));
    return v;
  };
  auto dec_at = [&](size_t i, size_t n) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    return kPerBlock ? hn::Set(df, d[(c0 + off + i) >> shift]) : LoadPart(df, d + off + i, n);
  };
  auto sink = [&](size_t i, hn::Vec<decltype(df)> q, size_t n) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    if constexpr (kCodes) return StoreCodes(*p.code, q, dec_at(i, n), n, io, row, c0 + off + i, flat + off + i);
    auto v = q;
    if (p.decode) {
      v = hn::Mul(q, dec_at(i, n));
      if (nv) v = hn::Mul(v, td);
    }
    if (count) {  // x is read before out, which may alias it, is written
      const auto xa = hn::And(hn::BitCast(di, LoadPart(df, x + off + i, n)), abs);
      const auto finite = hn::Lt(xa, inf);
      k.nonfinite += n - hn::CountTrue(di, hn::And(finite, hn::FirstN(di, n)));
      const auto fl = hn::And(hn::AndNot(hn::Eq(xa, hn::Zero(di)), finite), hn::RebindMask(di, hn::Eq(v, hn::Zero(df))));
      k.flushed += hn::CountTrue(di, fl);
    }
    StorePart(df, v, n, o + off + i);
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

// Whether the row's indices [index, index + w) cross a multiple of 2^32, where the row is cut
// into pieces that need not start on a vector of a block.
inline bool crosses_stream(uint64_t index, size_t w) { return (index & 0xffffffffu) + w > (uint64_t{1} << 32); }

HWY_NOINLINE void TileQuantize(const BlockKernelParams& p, const BlockTileIo& io, size_t r0, size_t r1,
                               size_t c0, size_t c1) {
  const size_t w = c1 - c0;
  BlockPassCounts k;
  float* e_col = io.buf;
  float* d_col = io.buf + w;
  // Blocks of 2^shift columns, a whole number of vectors, starting on a vector: one broadcast
  // scale per vector.
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const bool pow2 = (p.bc & (p.bc - 1)) == 0;
  bool per_block = p.bc > 1 && pow2 && p.bc % N == 0 && c0 % N == 0;
  for (size_t r = r0; r < r1 && per_block; ++r) per_block = !crosses_stream(p.index_base + r * p.cols + c0, w);
  const int shift = per_block ? hwy::Num0BitsBelowLS1Bit_Nonzero64(p.bc) : 0;
  const bool group = p.inline_scales && per_block;
  if (p.inline_scales && !group) {  // maxima and scales of the tile's blocks first (br == 1)
    TileAmax(p, io.in, r0, r1, c0, c1, io.amax);
    for (size_t r = r0; r < r1; ++r) {
      const size_t b0 = r * p.nbc + c0 / p.bc;
      Scales(p, io.amax + b0, (c1 + p.bc - 1) / p.bc - c0 / p.bc, io.enc + b0, io.dec + b0);
    }
  }
  for (size_t r = r0; r < r1; ++r) {
    const size_t rb = r / p.br;
    const size_t flat = r * p.cols + c0;
    const uint64_t index = p.index_base + flat;
    if (per_block) {
      uint32_t* am = group ? io.amax + rb * p.nbc : nullptr;
      if (io.codes) QuantizeRow<true, true>(p, io, flat, io.enc + rb * p.nbc, io.dec + rb * p.nbc, am, c0, w, shift, index, k);
      else QuantizeRow<true, false>(p, io, flat, io.enc + rb * p.nbc, io.dec + rb * p.nbc, am, c0, w, shift, index, k);
      continue;
    }
    float* e = io.enc + rb * p.nbc + c0;  // a block per column: the scales are per column already
    float* d = io.dec + rb * p.nbc + c0;
    if (p.bc != 1) {
      if (r == r0 || r % p.br == 0) {  // the block-row's scales spread over its columns
        for (size_t b = c0 / p.bc; b * p.bc < c1; ++b) {
          const size_t s0 = std::max(c0, b * p.bc) - c0, s1 = std::min(c1, b * p.bc + p.bc) - c0;
          std::fill(e_col + s0, e_col + s1, io.enc[rb * p.nbc + b]);
          std::fill(d_col + s0, d_col + s1, io.dec[rb * p.nbc + b]);
        }
      }
      e = e_col, d = d_col;
    }
    if (io.codes) QuantizeRow<false, true>(p, io, flat, e, d, nullptr, c0, w, 0, index, k);
    else QuantizeRow<false, false>(p, io, flat, e, d, nullptr, c0, w, 0, index, k);
  }
  if (io.counts) {
    io.counts->saturated += k.saturated;
    io.counts->flushed += k.flushed;
    io.counts->nonfinite += k.nonfinite;
  }
}

HWY_NOINLINE uint32_t FiniteAmax(const float* in, size_t n, bool* nonfinite) {
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToFloat<decltype(di)> df;
  const size_t N = hn::Lanes(di);
  const auto abs = hn::Set(di, static_cast<int32_t>(kAbsMask));
  const auto last = hn::Set(di, 0x7f7fffff);
  auto m = hn::Zero(di), bad = hn::Zero(di);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto a = hn::And(hn::BitCast(di, hn::LoadU(df, in + i)), abs);
    const auto over = hn::Gt(a, last);
    m = hn::Max(m, hn::IfThenZeroElse(over, a));
    bad = hn::Or(bad, hn::VecFromMask(di, over));
  }
  uint32_t r = static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
  bool nf = !hn::AllTrue(di, hn::Eq(bad, hn::Zero(di)));
  for (; i < n; ++i) {
    uint32_t bits;  // copied: callers pass block maxima (uint32_t) as well as floats
    std::memcpy(&bits, in + i, sizeof bits);
    const uint32_t a = bits & kAbsMask;
    if (a < kInfBits) r = std::max(r, a);
    else nf = true;
  }
  if (nonfinite) *nonfinite = nf;
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
HWY_EXPORT(RunAmax);

void block_tile_amax(const BlockKernelParams& p, const float* in, size_t r0, size_t r1, size_t c0,
                     size_t c1, uint32_t* amax) {
  HWY_DYNAMIC_DISPATCH(TileAmax)(p, in, r0, r1, c0, c1, amax);
}

void block_scales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec) {
  HWY_DYNAMIC_DISPATCH(Scales)(p, amax, n, enc, dec);
}

void block_tile_quantize(const BlockKernelParams& p, const BlockTileIo& io, size_t r0, size_t r1, size_t c0,
                         size_t c1) {
  HWY_DYNAMIC_DISPATCH(TileQuantize)(p, io, r0, r1, c0, c1);
}

uint32_t finite_amax_bits(const float* in, size_t n, bool* nonfinite) {
  return HWY_DYNAMIC_DISPATCH(FiniteAmax)(in, n, nonfinite);
}

void run_amax(const float* in, size_t runs, size_t len, uint32_t* amax) {
  HWY_DYNAMIC_DISPATCH(RunAmax)(in, runs, len, amax);
}

}  // namespace precsim
#endif  // HWY_ONCE

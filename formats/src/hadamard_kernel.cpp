// The random Hadamard transform of size 16 on FP32 data (Google Highway, every x86 target, picked
// at run time), the NVFP4 recipe's case: along runs of 16 contiguous values (rows), or down 16
// rows (columns, below, where the butterflies are whole-register operations as they stand).
//
// Along rows:
// Pease's form of the fast Walsh-Hadamard transform: every stage adds and subtracts neighbours,
// new[k] = v[2k] + v[2k+1] and new[k + 8] = v[2k] - v[2k+1], so one stage is two lane
// permutations (evens and odds) and an add and a subtract on whole registers, with no per-stage
// masks or sign multiplications. It pairs the same values in the same order (lower index first)
// as the Sylvester butterflies of hadamard.cpp: stage s pairs what the butterfly of span 2^(s-1)
// pairs, and the index bit it writes moves down one place per stage, so after the four stages
// every value is back at its own index. The same FP64 additions, so the same bits;
// tests/hadamard_test.cpp compares it with the butterflies on data whose sums round.
// The signs and 1/sqrt(16) = 1/4 multiply first (x * (s / 4)): scaling by a power of two commutes
// with every FP64 rounding here (no FP64 underflow from FP32 inputs), so this equals scaling last.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/hadamard_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "hadamard_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace precsim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_NOINLINE void Rht16Runs(const float* in, float* out, size_t runs, const double* signs) {
#if HWY_TARGET == HWY_SCALAR
  for (size_t r = 0; r < runs; ++r) {
    double v[16], w[16];
    for (int i = 0; i < 16; ++i) v[i] = static_cast<double>(in[r * 16 + i]) * (signs[i] * 0.25);
    for (int s = 0; s < 4; ++s) {
      for (int k = 0; k < 8; ++k) {
        w[k] = v[2 * k] + v[2 * k + 1];
        w[k + 8] = v[2 * k] - v[2 * k + 1];
      }
      for (int i = 0; i < 16; ++i) v[i] = w[i];
    }
    for (int i = 0; i < 16; ++i) out[r * 16 + i] = static_cast<float>(v[i]);
  }
#else
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as doubles
  constexpr size_t L = hn::MaxLanes(dd);
  static_assert(L >= 2 && L <= 16 && 16 % L == 0, "a run is a whole number of registers");
  constexpr size_t R = 16 / L;  // registers per run
  hn::Vec<decltype(dd)> sg[R];
  for (size_t k = 0; k < R; ++k) {
    HWY_ALIGN double s[L];
    for (size_t j = 0; j < L; ++j) s[j] = signs[k * L + j] * 0.25;
    sg[k] = hn::Load(dd, s);
  }
  for (size_t r = 0; r < runs; ++r) {
    const float* x = in + r * 16;
    hn::Vec<decltype(dd)> v[R], w[R];
    for (size_t k = 0; k < R; ++k) v[k] = hn::Mul(hn::PromoteTo(dd, hn::LoadU(df, x + k * L)), sg[k]);
    for (int s = 0; s < 4; ++s) {
      for (size_t k = 0; k < R / 2; ++k) {
        const auto even = hn::ConcatEven(dd, v[2 * k + 1], v[2 * k]);
        const auto odd = hn::ConcatOdd(dd, v[2 * k + 1], v[2 * k]);
        w[k] = hn::Add(even, odd);
        w[k + R / 2] = hn::Sub(even, odd);
      }
      for (size_t k = 0; k < R; ++k) v[k] = w[k];
    }
    for (size_t k = 0; k < R; ++k) hn::StoreU(hn::DemoteTo(df, v[k]), df, out + r * 16 + k * L);
  }
#endif
}

// FP64 to FP32, nearest-even, Inf beyond the range (x86's conversion; Highway's scalar DemoteTo
// clamps to the largest finite value instead).
template <class DF, class VD>
HWY_INLINE hn::Vec<DF> ToFloat(DF df, VD v) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(df, static_cast<float>(hn::GetLane(v)));
#else
  return hn::DemoteTo(df, v);
#endif
}

// The 8 butterflies of span H on 16 registers (pairs are independent: any order gives the same
// bits). Constant bounds, so that GCC unrolls it and v stays in registers.
template <size_t H, class V>
HWY_INLINE void Butterflies(V* v) {
#pragma GCC unroll 8
  for (size_t k = 0; k < 8; ++k) {
    const size_t j = (k / H) * 2 * H + k % H;
    const V p = v[j], q = v[j + H];
    v[j] = hn::Add(p, q);
    v[j + H] = hn::Sub(p, q);
  }
}

// Columns c < w of 16 rows `stride` floats apart, each column one vector: registers hold a row
// of L columns, so every butterfly is a whole-register add or subtract, in the Sylvester order of
// hadamard.cpp (span 1, 2, 4, 8; lower index first). With amax, the largest |y| of each column
// (as float bits) goes to amax[c]. Out of line, so that the signs stay in memory as broadcast
// operands (inlined, GCC keeps them in two registers and extracts each with a permutation).
template <class DD, class DF>
HWY_NOINLINE void Columns16(DD dd, DF df, const float* in, float* out, size_t stride, size_t c, size_t count,
                          const double* s4, uint32_t* amax) {
  constexpr size_t L = hn::MaxLanes(dd);
  const bool full = count == hn::Lanes(dd);
  hn::Vec<DD> v[16];
#pragma GCC unroll 16
  for (size_t i = 0; i < 16; ++i) {
    const float* x = in + i * stride + c;
    hn::Vec<DF> f;
    if (full) {
      f = hn::LoadU(df, x);
    } else {
      HWY_ALIGN float b[L] = {};
      std::copy_n(x, std::min(count, L), b);
      f = hn::Load(df, b);
    }
    v[i] = hn::Mul(hn::PromoteTo(dd, f), hn::Set(dd, s4[i]));
  }
  Butterflies<1>(v);
  Butterflies<2>(v);
  Butterflies<4>(v);
  Butterflies<8>(v);
  const hn::RebindToUnsigned<DF> du;
  auto m = hn::Zero(du);
  const auto abs = hn::Set(du, 0x7fffffffu);
#pragma GCC unroll 16
  for (size_t i = 0; i < 16; ++i) {
    const auto y = ToFloat(df, v[i]);
    m = hn::Max(m, hn::And(hn::BitCast(du, y), abs));
    float* o = out + i * stride + c;
    if (full) {
      hn::StoreU(y, df, o);
    } else {
      HWY_ALIGN float b[L];
      hn::Store(y, df, b);
      std::copy_n(b, std::min(count, L), o);
    }
  }
  if (!amax) return;
  HWY_ALIGN uint32_t b[L];
  hn::Store(m, du, b);
  std::copy_n(b, std::min(count, L), amax + c);
}

// Rows `stride` floats apart with a stride of a multiple of 4 KB (any power-of-two width from
// 1024 columns up) put the 16 rows' lines of a column into one L1 set, more than its ways: the
// columns are transformed in tiles of 64, each copied first into a buffer of 16 rows of 64 floats
// by whole cache lines, and copied back the same way.
HWY_NOINLINE void Rht16Columns(const float* in, float* out, size_t stride, size_t w, const double* signs,
                               uint32_t* amax) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::ScalableTag<float> dv;
  const size_t L = hn::Lanes(dd), V = hn::Lanes(dv);
  double s4[16];
  for (int i = 0; i < 16; ++i) s4[i] = signs[i] * 0.25;
  constexpr size_t kW = 64;
  HWY_ALIGN float buf[16 * kW];
  for (size_t c0 = 0; c0 < w; c0 += kW) {
    const size_t n = std::min(kW, w - c0);
    if (n < kW || V > kW || kW % V != 0) {  // a short last tile: in place, as it stands
      for (size_t c = c0; c < c0 + n; c += L) Columns16(dd, df, in, out, stride, c, std::min(L, c0 + n - c), s4, amax);
      continue;
    }
    for (size_t i = 0; i < 16; ++i)
      for (size_t c = 0; c < kW; c += V) hn::Store(hn::LoadU(dv, in + i * stride + c0 + c), dv, buf + i * kW + c);
    for (size_t c = 0; c < kW; c += L) Columns16(dd, df, buf, buf, kW, c, L, s4, amax ? amax + c0 : nullptr);
    for (size_t i = 0; i < 16; ++i)
      for (size_t c = 0; c < kW; c += V) hn::StoreU(hn::Load(dv, buf + i * kW + c), dv, out + i * stride + c0 + c);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace precsim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace precsim {

HWY_EXPORT(Rht16Runs);
HWY_EXPORT(Rht16Columns);

void rht16_runs(const float* in, float* out, size_t runs, const double* signs) {
  HWY_DYNAMIC_DISPATCH(Rht16Runs)(in, out, runs, signs);
}

void rht16_columns(const float* in, float* out, size_t stride, size_t w, const double* signs, uint32_t* amax) {
  HWY_DYNAMIC_DISPATCH(Rht16Columns)(in, out, stride, w, signs, amax);
}

}  // namespace precsim
#endif  // HWY_ONCE

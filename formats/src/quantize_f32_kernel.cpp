// The vectorised float32 quantize kernel (Google Highway, compiled for every x86 target and picked
// at run time). It gives the same bits and the same statistics as round_exact() via
// quantize_reference(); tests/quantize_simd_test.cpp checks that on every compiled target.
//
// Per lane, on the input's bits: a = |x| bits, E its exponent field, S = its 24-bit significand
// (lsb weight 2^(max(E,1)-150)). d = bits of S below the format's quantum; kept = S >> d is rounded
// by the mode with the dropped bits aligned to the top of a word (frac), and the result is rebuilt
// exactly as bits: (max(E,1)-1) << 23 plus kept << d, which carries into the exponent by itself.
// Rare lanes (Inf, NaN, invalid) are fixed up only in vectors that contain one. Two fast paths use
// exact float additions, multiplications and conversions, so they assume the default
// floating-point environment (no FTZ/DAZ), as the scalar path's float-to-double conversion does.

// Highway re-includes this file once per target; the path is relative to formats/include, the
// include directory this library already has.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "../src/quantize_f32_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "quantize_f32_plan.h"
#include "quantize_f32_round-inl.h"

HWY_BEFORE_NAMESPACE();
namespace precsim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kStats>
HWY_NOINLINE void QuantizeMode(const F32Plan& p, uint32_t k0, uint32_t k1, const float* in, float* out,
                               size_t n, uint32_t idx0, Counts& counts) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  auto source = [&](size_t i, size_t count) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    if (count == N) return hn::LoadU(df, in + i);
    HWY_ALIGN float buf[hn::MaxLanes(df)] = {};
    for (size_t j = 0; j < count; ++j) buf[j] = in[i + j];
    return hn::Load(df, buf);
  };
  auto sink = [&](size_t i, hn::Vec<decltype(df)> v, size_t count) HWY_ATTR PRECSIM_INLINE_LAMBDA {
    if (count == N) return hn::StoreU(v, df, out + i);
    HWY_ALIGN float buf[hn::MaxLanes(df)];
    hn::Store(v, df, buf);
    for (size_t j = 0; j < count; ++j) out[i + j] = buf[j];
  };
  RoundAnyMode<kStats>(p, k0, k1, n, idx0, counts, source, sink);
}

void QuantizeF32(const F32Plan& p, uint32_t k0, uint32_t k1, const float* in, float* out, size_t n,
                 uint32_t idx0, Counts* counts) {
  Counts unused{};
  if (counts) QuantizeMode<true>(p, k0, k1, in, out, n, idx0, *counts);
  else QuantizeMode<false>(p, k0, k1, in, out, n, idx0, unused);
}

int64_t KernelTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace precsim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/quantize.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {

HWY_EXPORT(QuantizeF32);
HWY_EXPORT(KernelTarget);

void quantize_f32_span(const F32Plan& p, const SrKey& key, const float* in, float* out, size_t n,
                       QuantStats* stats, uint64_t index_base) {
  // Pieces never cross a multiple of 2^32 in the index (the SR stream changes there) and stay
  // small enough for the kernel's 32-bit lane counters.
  constexpr uint64_t kPiece = uint64_t{1} << 24;
  uint64_t counts[6] = {};
  size_t done = 0;
  while (done < n) {
    const uint64_t index = index_base + done;
    const uint64_t to_boundary = (uint64_t{1} << 32) - (index & 0xffffffffu);
    const size_t len = static_cast<size_t>(std::min<uint64_t>({n - done, kPiece, to_boundary}));
    uint32_t k0 = 0, k1 = 0;
    if (p.rounding == Rounding::kStochastic) {
      const SrStream st = make_sr_stream(key, index >> 32);
      k0 = st.k0;
      k1 = st.k1;
    }
    HWY_DYNAMIC_DISPATCH(QuantizeF32)(p, k0, k1, in + done, out + done, len,
                                      static_cast<uint32_t>(index), stats ? &counts : nullptr);
    done += len;
  }
  if (stats) {
    stats->count += n;
    stats->inexact += counts[0];
    stats->underflow_to_zero += counts[1];
    stats->subnormal += counts[2];
    stats->overflow += counts[3];
    stats->saturated += counts[4];
    stats->nan += counts[5];
  }
}

namespace {

// Compiled targets this CPU supports, read before any forcing changes what Highway reports.
const std::vector<int64_t>& available_targets() {
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}

}  // namespace

std::vector<std::string> quantize_simd_targets() {
  std::vector<std::string> names;
  for (const int64_t t : available_targets()) names.emplace_back(hwy::TargetName(t));
  return names;
}

std::string quantize_simd_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(KernelTarget)()); }

void force_quantize_simd_target(std::string_view name) {
  const auto& targets = available_targets();
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return;
  }
  for (const int64_t t : targets) {
    if (name == hwy::TargetName(t)) {
      hwy::SetSupportedTargetsForTest(t);
      return;
    }
  }
  std::string allowed;
  for (const auto& n : quantize_simd_targets()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown SIMD target '" + std::string(name) + "'; this build and CPU have: " + allowed);
}

}  // namespace precsim
#endif  // HWY_ONCE

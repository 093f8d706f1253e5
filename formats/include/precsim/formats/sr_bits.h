// The counter-based generator behind stochastic rounding. Bits depend only on (key, index), never
// on thread count or call order, so any partition of an array gives the same result.
#pragma once

#include <cstdint>

#include "precsim/formats/quant_options.h"

namespace precsim {

// 64-bit finaliser of SplitMix64 (Steele, Lea, Flood 2014): a bijection with full avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Folds the key into two 32-bit words used by the per-element hash.
struct SrStream {
  uint32_t k0, k1;
  uint64_t hi_key;  // mixed with index >> 32, for arrays of more than 2^32 elements
};

constexpr SrStream make_sr_stream(const SrKey& key, uint64_t index_hi = 0) {
  uint64_t h = mix64(key.seed ^ 0x243f6a8885a308d3ULL);
  h = mix64(h ^ key.step);
  h = mix64(h ^ ((uint64_t{key.tensor} << 32) | key.role));
  h = mix64(h ^ index_hi);
  return SrStream{static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32), h};
}

// Per-element hash on 32-bit lanes (so that SIMD paths compute it natively): two rounds of a
// multiply-xorshift permutation (constants from Wellons' hash-prospector "lowbias32"), each keyed.
constexpr uint32_t hash32(uint32_t x, uint32_t k0, uint32_t k1) {
  x ^= k0;
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  x ^= k1;
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return x;
}

constexpr uint32_t sr_bits(const SrKey& key, uint64_t index) {
  const SrStream s = make_sr_stream(key, index >> 32);
  return hash32(static_cast<uint32_t>(index), s.k0, s.k1);
}

}  // namespace precsim

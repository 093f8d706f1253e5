// Array API: round whole float32/float64 arrays into a format, to values or to packed codes.
// Element i of the array uses stochastic-rounding index index_base + i, so any split of an array
// across calls or threads gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

// out[i] = the value of in[i] rounded into f (out may alias in). The float output holds the
// rounded value exactly whenever it is a float (every preset but fp64; a custom format whose
// values exceed FP32's range gives +-Inf there). Multithreaded (OpenMP) and vectorised (Highway).
void quantize(const Format& f, std::span<const float> in, std::span<float> out,
              const QuantOptions& opts = {}, QuantStats* stats = nullptr, uint64_t index_base = 0);
void quantize(const Format& f, std::span<const double> in, std::span<double> out,
              const QuantOptions& opts = {}, QuantStats* stats = nullptr, uint64_t index_base = 0);

// Bytes per code in packed arrays: the smallest of 1, 2, 4, 8 that holds f.bits().
size_t code_bytes(const Format& f);

// codes: in.size() codes of code_bytes(f) bytes each, little-endian (FP4/FP6 one per byte; see
// pack_nibbles for two FP4 codes per byte).
void encode_array(const Format& f, std::span<const float> in, void* codes,
                  const QuantOptions& opts = {}, QuantStats* stats = nullptr, uint64_t index_base = 0);
void encode_array(const Format& f, std::span<const double> in, void* codes,
                  const QuantOptions& opts = {}, QuantStats* stats = nullptr, uint64_t index_base = 0);
void decode_array(const Format& f, const void* codes, std::span<float> out);
void decode_array(const Format& f, const void* codes, std::span<double> out);

// Two 4-bit codes per byte, element 2i in the low nibble (ml_dtypes, PyTorch float4_e2m1fn_x2).
void pack_nibbles(std::span<const uint8_t> codes, std::span<uint8_t> packed);
void unpack_nibbles(std::span<const uint8_t> packed, std::span<uint8_t> codes);

// Scalar reference of the float32 path: one element at a time through encode(). The vectorised
// kernel must give the same bits; tests compare them.
void quantize_reference(const Format& f, std::span<const float> in, std::span<float> out,
                        const QuantOptions& opts, QuantStats* stats, uint64_t index_base);

// Whether quantize() on float32 takes the vectorised kernel for this format and these options: every
// format whose values are all float32 values (all presets but fp64); otherwise the scalar path.
bool quantize_is_vectorised(const Format& f, const QuantOptions& opts = {});

// The Highway targets of the float32 kernel compiled into this build that this CPU supports, best
// first (on x86: "AVX3", "AVX2", "SSE4", "SSSE3", "SCALAR"); quantize() uses the first unless forced.
std::vector<std::string> quantize_simd_targets();
// The target quantize() uses now.
std::string quantize_simd_target();
// Forces every Highway dispatch in the process onto one of quantize_simd_targets(); "" restores
// the best. For tests and benchmarks only: process-wide and not thread-safe. Throws
// std::invalid_argument naming the available targets.
void force_quantize_simd_target(std::string_view name);

}  // namespace precsim

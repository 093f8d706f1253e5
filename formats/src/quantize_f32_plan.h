// Private to formats/: the constants the vectorised float32 quantize kernel needs, derived once per
// call from a Format and QuantOptions. Every constant is a float32 bit pattern or a shift count, so
// the kernel works on the input's bits with integer lanes and never rounds in floating point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

struct F32Plan {
  Rounding rounding = Rounding::kNearestEven;
  int32_t man_bits = 0;
  // Bits to drop from the input's 24-bit significand S (lsb weight 2^(Eeff-150)) are
  // d = max(23 - m, dq - Eeff) where dq = emin - m + 150; below float32's normal range the
  // leading one of S moves down, which matters only when the format's quantum is finer than
  // float32's there (need_lead: formats whose smallest normal is below 2^-126, as E8M0).
  int32_t dq = 0;
  bool need_lead = false;
  // Formats without subnormals: below 2^emin (gap_below) the only neighbours are 0 and 2^emin,
  // so d = dq_gap - Eeff there.
  bool gap = false;
  uint32_t gap_below = 0;
  int32_t dq_gap = 0;
  uint32_t quantum_bits = 0;     // bits of 2^quantum_exp(): rounding up from under its half
  uint32_t zero_bits = 0;        // what zero rounds to (0; E8M0's smallest value, it has no zero)
  bool zero_inexact = false;     // E8M0: zero and tiny inputs give 2^-127, inexact, no underflow
  bool signed_zero = false;      // -0 exists
  uint32_t subnormal_below = 0;  // results below these bits are subnormal (0: format has none)
  bool flush = false;
  uint32_t flush_below = 0;      // flushed to zero when below these bits (2^emin)
  uint32_t max_bits = 0;         // largest finite value
  bool is_signed = true;
  uint32_t nan_in_bits = 0;      // NaN input or invalid (negative into unsigned): NaN or +max
  // Overflow of a finite value rounding away from zero in IEEE mode: Inf (signed) or NaN.
  bool overflow_nonfinite = false;
  uint32_t overflow_bits = 0;
  bool overflow_signed = false;
  bool overflow_is_nan = false;
  bool overflow_result_signed = true;  // the overflow result of the nearest modes and SR
  // Inf input (valid sign): Inf kept, NaN, or the largest finite value (saturated).
  uint32_t inf_bits = 0;
  bool inf_signed = false;
  bool inf_is_nan = false;
  bool inf_saturates = false;
  uint32_t sr_mask = 0;          // the top sr_bits bits
  // Nearest-even and SR have a faster path when every float32 at or above 2^emin is a float32
  // normal and drops 1..22 bits; nearest-even then rounds below 2^emin by adding
  // magic = 2^(quantum_exp + 23).
  bool fixed_drop = false;
  // Values below 2^emin are common (smallest normal at or above 2^-10: FP8, FP6, FP4, integers):
  // handle them in every vector instead of branching on their presence.
  bool often_small = false;
  float magic = 0;
  // SR below 2^emin through float arithmetic on |x| / quantum (both powers of two normal floats).
  bool sr_small_float = false;
  float quantum = 0, inv_quantum = 0;
};

// nullopt when the format's values are not all float32 values (fp64, wide custom formats):
// then the scalar path runs.
std::optional<F32Plan> make_f32_plan(const Format& f, const QuantOptions& o);

// Rounds n elements whose stochastic-rounding indices are index_base + i. Adds to *stats when it
// is not null. n may be anything; callers cut arrays into chunks for threads.
void quantize_f32_span(const F32Plan& p, const SrKey& key, const float* in, float* out, size_t n,
                       QuantStats* stats, uint64_t index_base);

}  // namespace precsim

// Scalar rounding into any format: one routine on the exact value serves every format, every
// rounding mode and the in-format arithmetic (as SoftFloat's roundPackTo*).
#pragma once

#include <cstdint>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

// An exact non-negative magnitude (sig + s) * 2^exp with 0 <= s < 1, where s is non-zero exactly
// when `sticky` is set. Rounding needs nothing more than this to decide every deterministic mode
// exactly. Stochastic rounding reads the discarded fraction's top k bits from sig, so with
// `sticky` set a caller must give sig enough bits below the kept ones (a full 64-bit significand
// is always enough); otherwise P(up) may be low by up to 2^(shortfall - k).
struct Exact {
  bool negative = false;
  uint64_t sig = 0;
  int exp = 0;
  bool sticky = false;
};

struct Rounded {
  uint64_t code = 0;    // full code, sign bit included
  uint32_t status = kOk;
};

// Rounds a finite exact value. `random_bits` are used only by stochastic rounding (their top
// opts.sr_bits bits): the value rounds up when the discarded fraction, truncated to k bits,
// exceeds the k-bit random number, so P(up) = floor(frac * 2^k) / 2^k; this is the same as adding
// k random bits below the last kept bit and truncating, as hardware SR does. The neighbours are
// those of the format's value grid: among subnormals the gap is the subnormal spacing (and below
// the smallest subnormal the lower neighbour is zero); above the largest finite value the upper
// neighbour is the next value of an unbounded exponent range, so the result overflows (Inf, NaN
// or the largest finite, per QuantOptions::overflow) with probability floor(frac * 2^k) / 2^k.
// Ties to even in a format without mantissa bits (e8m0) go up: the kept bit is the implicit 1.
// Overflow to NaN keeps the sign of x (E4M3FN: -465 -> 0xff), as cuda_fp8.h and ml_dtypes do.
Rounded round_exact(const Format& f, const Exact& x, const QuantOptions& opts, uint32_t random_bits);

// Rounds a double (any value, NaN and Inf included). SR bits come from sr_bits(opts.sr_key, index).
Rounded encode(const Format& f, double x, const QuantOptions& opts = {}, uint64_t index = 0);
// Exact value of a code (NaN codes give a quiet NaN; the unused integer code gives its
// two's complement value).
double decode(const Format& f, uint64_t code);
// Rounds and returns the value: decode(f, encode(f, x, ...).code).
double round_to(const Format& f, double x, const QuantOptions& opts = {}, uint32_t* status = nullptr,
                uint64_t index = 0);

// Canonical codes.
uint64_t nan_code(const Format& f);      // quiet, positive where the format has a sign
uint64_t inf_code(const Format& f, bool negative);  // only where f.has_inf()
uint64_t max_code(const Format& f, bool negative);  // largest finite magnitude
bool is_nan_code(const Format& f, uint64_t code);
bool is_inf_code(const Format& f, uint64_t code);

// Fields of a code for display: sign | exponent | mantissa (integers: the whole code).
struct CodeFields {
  uint32_t sign;
  uint64_t exponent;
  uint64_t mantissa;
};
CodeFields split_code(const Format& f, uint64_t code);

// Monotone index of a finite code among the format's values, 0 at zero (both zeros), negative
// below: the distance in ulps of f between two finite codes is the difference of their ordinals.
int64_t ordinal(const Format& f, uint64_t code);

}  // namespace precsim

// In-format arithmetic: add, sub, mul, fma, div and sqrt of values of any Format, correctly rounded
// in any rounding mode. Each operation is exact integer arithmetic followed by one call to
// round_exact (as SoftFloat: unpack, special values, exact arithmetic, round once), so there is
// never double rounding, whatever the format (fp64 fma included).
//
// Conventions, shared by every format (IEEE 754 where the format has the values IEEE needs):
// - NaN in gives NaN out (kNanResult); the result is the canonical quiet NaN, nan_code(f), not the
//   input's payload. There are no signalling NaNs.
// - Invalid operations (Inf - Inf, 0 * Inf, 0 / 0, Inf / Inf, sqrt of a negative number, fma
//   whose product is invalid or gives Inf - Inf) set kInvalid and give nan_code(f): NaN where the
//   format has one (kNanResult too); in a format without NaN (FP6, FP4, integers) nan_code(f) is
//   the largest positive finite value, as encode() gives for a NaN.
// - An infinite exact result (an Inf operand, or a finite non-zero number divided by zero, which
//   also sets kDivByZero) is delivered as encode() delivers +-Inf under the same options: Inf where
//   the format has Inf and overflow is kIeee; NaN (kNanResult) where it has NaN but no Inf and
//   overflow is kIeee, keeping the sign where the format can (-1/0 in float8_e4m3fn is 0xff, as a
//   finite overflow is, after cuda_fp8.h); otherwise the largest finite value of that sign
//   (kSaturated). Finite results that overflow are handled by round_exact (see Overflow).
// - Zeros: x + (-x) and x - x give +0, or -0 when rounding down (kDown); (+0) + (-0) likewise;
//   (-0) + (-0) = -0; products and quotients take the xor of the signs; sqrt(-0) = -0. Formats
//   without -0 (fnuz, integers, unsigned) give +0.
// - A negative result in an unsigned format (E8M0) is kInvalid, as in round_exact; E8M0 has no zero,
//   so a result that rounds to zero (or x - x) gives its smallest value 2^-127 with kInexact.
// - Integer formats compute exactly and round the result, so 7 / 2 is 4 in nearest-even and 3
//   toward zero; overflow saturates (they have neither Inf nor NaN).
// - With QuantOptions::flush_subnormals, subnormal inputs read as zero of the same sign (DAZ) and
//   results below the smallest normal become zero (FTZ, done by round_exact).
// - Stochastic rounding draws its bits from sr_bits(opts.sr_key, index): one index per operation.
// - Codes are read as decode() reads them (the unused integer code is -2^(bits-1); non-canonical
//   field-0 codes of a format without subnormals are zero).
#pragma once

#include <cstdint>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/formats/rounding.h"

namespace precsim {

// Codes in, code and status out.
Rounded add_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& opts = {},
                  uint64_t index = 0);
Rounded sub_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& opts = {},
                  uint64_t index = 0);
Rounded mul_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& opts = {},
                  uint64_t index = 0);
Rounded div_codes(const Format& f, uint64_t a, uint64_t b, const QuantOptions& opts = {},
                  uint64_t index = 0);
// a * b + c with one rounding.
Rounded fma_codes(const Format& f, uint64_t a, uint64_t b, uint64_t c, const QuantOptions& opts = {},
                  uint64_t index = 0);
Rounded sqrt_code(const Format& f, uint64_t a, const QuantOptions& opts = {}, uint64_t index = 0);

// Values in, value out: "add in format f". Operands must be values of f (NaN and +-Inf included
// where f has them); anything else throws std::invalid_argument naming the value and the format,
// because rounding an operand first would be a second, hidden rounding. With flush_subnormals a
// subnormal operand is accepted and read as zero. `status`, when given, receives the status bits.
double add_in(const Format& f, double a, double b, const QuantOptions& opts = {},
              uint32_t* status = nullptr, uint64_t index = 0);
double sub_in(const Format& f, double a, double b, const QuantOptions& opts = {},
              uint32_t* status = nullptr, uint64_t index = 0);
double mul_in(const Format& f, double a, double b, const QuantOptions& opts = {},
              uint32_t* status = nullptr, uint64_t index = 0);
double div_in(const Format& f, double a, double b, const QuantOptions& opts = {},
              uint32_t* status = nullptr, uint64_t index = 0);
double fma_in(const Format& f, double a, double b, double c, const QuantOptions& opts = {},
              uint32_t* status = nullptr, uint64_t index = 0);
double sqrt_in(const Format& f, double a, const QuantOptions& opts = {}, uint32_t* status = nullptr,
               uint64_t index = 0);

// The code of a value of f; throws std::invalid_argument when v is not a value of f.
uint64_t code_of(const Format& f, double v);

}  // namespace precsim

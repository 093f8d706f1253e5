// How a value is rounded into a format. Never global state: every call takes its options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace precsim {

enum class Rounding : uint8_t {
  kNearestEven,
  kNearestAway,
  kTowardZero,
  kUp,    // toward +Inf
  kDown,  // toward -Inf
  kOdd,   // truncate, then set the last bit when inexact (round-to-odd)
  kStochastic,
  // IEEE P3109 v4.0 §4.7.4 stochastic rounding with N = sr_bits random bits R (the top N bits of
  // the element's 32-bit stream), for the discarded fraction v: A rounds away when
  // floor(v*2^N) + R >= 2^N; B when floor(v*2^(N+1)) + 2R + 1 >= 2^(N+1); C when
  // RNITE(v*2^N) + R >= 2^N (RNITE: round to nearest integer, ties to even).
  kStochasticA,
  kStochasticB,
  kStochasticC,
};

// Whether a mode draws random bits (kStochastic and the P3109 variants).
constexpr bool is_stochastic(Rounding r) {
  return r == Rounding::kStochastic || r == Rounding::kStochasticA || r == Rounding::kStochasticB ||
         r == Rounding::kStochasticC;
}

enum class Overflow : uint8_t {
  // IEEE 754: the nearest modes and stochastic rounding, "up" for positive and "down" for negative
  // values overflow to Inf, or NaN where the format has no Inf; toward-zero, odd and the other
  // directed cases give the largest finite value. Formats with neither Inf nor NaN saturate.
  kIeee,
  // Overflow and Inf inputs give the largest finite value of the same sign (cuda_fp8.h SATFINITE).
  kSaturate,
  // IEEE P3109 v4.0 §4.7.5 saturation, for any format ("extended" meaning the format has Inf):
  // SatFinite clamps every out-of-range value and Inf to the finite range; SatPropagate clamps
  // finite out-of-range values but keeps Inf inputs; SatNone sends out-of-range values to Inf in
  // extended formats and to the largest finite value in finite ones, except where the rounding
  // direction asks for a finite result (toward zero; down above, up below; odd in unsigned
  // extended formats); negative values into unsigned formats give NaN (0 under toward-zero and up).
  kSatFinite,
  kSatPropagate,
  kSatNone,
};

constexpr bool is_p3109_saturation(Overflow o) {
  return o == Overflow::kSatFinite || o == Overflow::kSatPropagate || o == Overflow::kSatNone;
}

// Which stochastic-rounding stream a tensor draws from. Element i of the tensor uses the bits
// sr_bits(key, i): the same key and index give the same bits on any thread count.
struct SrKey {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint32_t tensor = 0;
  uint32_t role = 0;
  friend bool operator==(const SrKey&, const SrKey&) = default;
};

struct QuantOptions {
  Rounding rounding = Rounding::kNearestEven;
  Overflow overflow = Overflow::kIeee;
  // Values below the format's smallest normal become (signed) zero before rounding, so no
  // subnormal is ever produced, as flush-to-zero hardware does.
  bool flush_subnormals = false;
  int sr_bits = 32;               // k random bits for stochastic rounding, 1..32
  SrKey sr_key{};
  friend bool operator==(const QuantOptions&, const QuantOptions&) = default;
};

// Status bits of one rounding, or-ed across operations (as APFloat's opStatus).
enum Status : uint32_t {
  kOk = 0,
  kInexact = 1u << 0,
  kUnderflowToZero = 1u << 1,  // non-zero input, zero result
  kSubnormalResult = 1u << 2,
  kOverflow = 1u << 3,         // finite input whose rounded value exceeds the largest finite one
  kSaturated = 1u << 4,        // result clamped to the largest finite value (overflow or Inf in)
  kNanResult = 1u << 5,        // NaN out (NaN in, or overflow/invalid where the format has NaN)
  kInvalid = 1u << 6,          // value not representable at all (negative into an unsigned format,
                               // invalid arithmetic such as Inf - Inf)
  kDivByZero = 1u << 7,
};

// Counts over an array; every quantize call can fill one at little cost.
struct QuantStats {
  uint64_t count = 0;
  uint64_t inexact = 0;
  uint64_t underflow_to_zero = 0;
  uint64_t subnormal = 0;
  uint64_t overflow = 0;
  uint64_t saturated = 0;
  uint64_t nan = 0;
  void add(uint32_t status);
  QuantStats& operator+=(const QuantStats& o);
  friend bool operator==(const QuantStats&, const QuantStats&) = default;
};

std::string_view to_string(Rounding);
std::string_view to_string(Overflow);
// Parses "nearest-even" ... "stochastic-c" (overflow modes case-insensitively, so that the
// report's spelling SatFinite is accepted); throws std::invalid_argument naming the allowed values.
Rounding parse_rounding(std::string_view);
Overflow parse_overflow(std::string_view);
std::string status_to_string(uint32_t status);  // "inexact|underflow" or "exact"

}  // namespace precsim

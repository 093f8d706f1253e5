// The exact reference: a fixed-point long accumulator (Kulisch) that holds any sum of products of
// float values, and of doubles, without rounding. Rounded once at the end into any format.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/formats/rounding.h"

namespace precsim {

class LongAccumulator {
 public:
  // Bit 0 of the accumulator weighs 2^kLsbExp, below the smallest double subnormal squared
  // exponent a float product can reach (2^-298) and the smallest double (2^-1074).
  static constexpr int kLsbExp = -1088;
  static constexpr int kDigitBits = 32;
  static constexpr int kDigits = 72;  // covers up to 2^(kLsbExp + 32*72) = 2^1216

  void add_product(float a, float b);  // exact a*b
  void add(double x);                  // exact x
  void clear() { *this = LongAccumulator(); }

  bool is_nan() const { return nan_ || (pos_inf_ && neg_inf_); }
  // The exact value as sign, magnitude (top 64 bits) and sticky, for round_exact. Requires a
  // finite, non-NaN sum.
  Exact exact() const;
  // Rounds the exact sum into f (NaN and Inf handled as IEEE sums would).
  Rounded round(const Format& f, const QuantOptions& o = {}) const;
  double to_double() const;  // rounded to nearest-even in FP64
  int sign() const;          // -1, 0, +1 of the finite sum

 private:
  void add_scaled(uint64_t mag, int exp, bool negative);
  void normalize() const;
  mutable std::array<int64_t, kDigits> d_{};
  mutable uint32_t pending_ = 0;  // adds since the last carry normalisation
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
};

// Exact c + sum a[i]*b[i] rounded into f.
Rounded exact_dot(std::span<const float> a, std::span<const float> b, double c, const Format& f,
                  const QuantOptions& o = {});
double exact_dot_double(std::span<const float> a, std::span<const float> b, double c = 0);

}  // namespace precsim

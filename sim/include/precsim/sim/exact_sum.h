// Exact sum of floats and doubles in a wide fixed-point integer (no rounding until the end), the
// reference for reductions: every double is an integer multiple of 2^-1074 below 2^1024, so a
// two's complement integer of 2176 bits plus headroom holds any sum of up to 2^60 doubles.
#pragma once

#include <array>
#include <cstdint>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

class ExactSum {
 public:
  void add(double v);  // v must be finite
  void add_product(float a, float b);  // exact: the product of two floats is a double
  bool is_zero() const;
  // The exact sum rounded once into f (nearest-even unless opts say otherwise).
  double round(const Format& f, const QuantOptions& opts = {}) const;
  double to_double() const;  // correctly rounded to fp64

 private:
  static constexpr int kLimbs = 36;  // 2304 bits, value = integer * 2^-1074
  std::array<uint64_t, kLimbs> limb_{};
  void add_shifted(uint64_t mag, int shift, bool negative);
};

}  // namespace precsim

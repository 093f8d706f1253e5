// One dot product through an accumulation model against its exact value (`precsim dot`).
#pragma once

#include <cstdint>
#include <span>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim {

struct DotError {
  double result = 0;            // c + sum a_i b_i through the model
  uint32_t status = 0;          // the model's rounding status flags
  double exact = 0;             // the exact sum rounded once to fp64
  bool exact_fits_fp64 = true;  // that rounding was exact
  double exact_in_acc = 0;      // the exact sum rounded once to the accumulator format
  double abs_error = 0, rel_error = 0;  // against `exact` (rel: inf when exact is 0 and result is not)
  int64_t ulp_error = 0;        // result - exact_in_acc in ulps of the accumulator (0 when either is not finite)
};

// Throws std::invalid_argument (from accum_dot) for operands the model does not take.
DotError dot_error(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                   const Format& in);
// Operands of two formats (E4M3 x E5M2, an instruction's A and B types).
DotError dot_error(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                   const Format& a_fmt, const Format& b_fmt);

}  // namespace precsim

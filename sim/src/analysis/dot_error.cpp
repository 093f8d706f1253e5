#include "precsim/sim/analysis/dot_error.h"

#include <cmath>

#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/accum/gemm.h"

namespace precsim {

DotError dot_error(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                   const Format& in) {
  return dot_error(model, a, b, c, in, in);
}

DotError dot_error(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                   const Format& a_fmt, const Format& b_fmt) {
  DotError d;
  d.result = accum_dot(model, a, b, c, a_fmt, b_fmt, &d.status);
  LongAccumulator acc;
  acc.add(c);
  for (size_t i = 0; i < a.size(); ++i) acc.add_product(a[i], b[i]);
  const Format fp64 = format_by_name("fp64");
  const Rounded ex = acc.round(fp64);
  d.exact = decode(fp64, ex.code);
  d.exact_fits_fp64 = (ex.status & kInexact) == 0;
  const Rounded ex_acc = acc.round(model.acc);
  d.exact_in_acc = decode(model.acc, ex_acc.code);
  d.abs_error = std::fabs(d.result - d.exact);
  d.rel_error = d.exact != 0 ? d.abs_error / std::fabs(d.exact) : (d.result == 0 ? 0.0 : INFINITY);
  const uint64_t cr = encode(model.acc, d.result).code, ce = ex_acc.code;
  const bool finite = std::isfinite(d.result) && std::isfinite(d.exact_in_acc);
  d.ulp_error = finite ? ordinal(model.acc, cr) - ordinal(model.acc, ce) : 0;
  return d;
}

}  // namespace precsim

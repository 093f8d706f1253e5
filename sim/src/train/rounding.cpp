#include "precsim/sim/train/rounding.h"

#include <cmath>
#include <type_traits>

#include "precsim/formats/quantize.h"

namespace precsim {
namespace {

template <class T>
uint64_t count_nonzero(std::span<const T> v) {
  uint64_t n = 0;
  for (T e : v) n += e != T(0) && std::isfinite(e);
  return n;
}

}  // namespace

template <class T>
bool format_holds_type(const TensorFormat& tf) {
  const Format& f = tf.format;
  const bool wide = f.kind == FormatKind::kFloat && f.exp_bits >= 8 && f.man_bits >= 23 && f.subnormals;
  return std::is_same_v<T, float> ? wide : (wide && f.man_bits >= 52 && f.exp_bits >= 11);
}

template <class T>
void round_role(std::span<T> v, const TensorFormat& tf, Role role, uint64_t seed, uint64_t step, uint32_t tensor,
                StepStats* st) {
  if (format_holds_type<T>(tf)) return;
  QuantOptions o;
  o.rounding = tf.rounding;
  o.sr_key = SrKey{seed, step, tensor, static_cast<uint32_t>(role)};
  if (st) st->role_nonzero[static_cast<size_t>(role)] += count_nonzero(std::span<const T>(v));
  QuantStats q;
  quantize(tf.format, std::span<const T>(v.data(), v.size()), v, o, &q);
  if (st) st->roles[static_cast<size_t>(role)] += q;
}

template bool format_holds_type<float>(const TensorFormat&);
template bool format_holds_type<double>(const TensorFormat&);
template void round_role<float>(std::span<float>, const TensorFormat&, Role, uint64_t, uint64_t, uint32_t, StepStats*);
template void round_role<double>(std::span<double>, const TensorFormat&, Role, uint64_t, uint64_t, uint32_t,
                                 StepStats*);

}  // namespace precsim

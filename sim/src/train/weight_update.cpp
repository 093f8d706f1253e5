#include "precsim/sim/train/weight_update.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "precsim/formats/quantize.h"
#include "precsim/sim/train/sr_keys.h"

namespace precsim {
namespace {

// Per-tensor amax scaling of an FP8 optimizer state: stored as q(x * s) / s, s = max / amax.
template <class T>
void round_state(std::vector<T>& v, const Recipe& r, uint64_t seed, uint32_t tensor, uint64_t step, StepStats* st) {
  if (format_holds_type<T>(r.optimizer_state)) return;
  if (!r.optimizer_state_scaled) {
    round_role(std::span<T>(v), r.optimizer_state, Role::kOptimizerState, seed, step, tensor, st);
    return;
  }
  double amax = 0;
  for (T e : v) amax = std::max(amax, std::fabs(double(e)));
  const T scale = amax > 0 && std::isfinite(amax) ? static_cast<T>(r.optimizer_state.format.max_finite() / amax) : T(1);
  for (T& e : v) e *= scale;
  round_role(std::span<T>(v), r.optimizer_state, Role::kOptimizerState, seed, step, tensor, st);
  for (T& e : v) e /= scale;
}

}  // namespace

template <class T>
void apply_update(RunState<T>& s, std::span<const T> grads, const Recipe* r, const OptimizerConfig& opt, double lr,
                  uint64_t seed, uint64_t step, StepStats& st) {
  st.lr = lr;
  s.opt_steps += 1;
  const size_t n = s.weights.size();
  // The optimizer's new weights in the opmath type T; the recipe then decides how they are stored.
  std::vector<T> target(n);
  optimizer_update(target.data(), s.m.data(), s.v.data(), s.weights.data(), grads.data(), n, opt, lr, s.opt_steps);
  if (r) {
    round_state(s.m, *r, seed, sr_keys::kOptimizerM, step, &st);
    if (opt.kind == OptimizerKind::kAdamW) round_state(s.v, *r, seed, sr_keys::kOptimizerV, step, &st);
  }
  const std::vector<T> old = s.weights;
  if (!r || r->has_master()) {
    s.weights = target;
    if (r) {
      const TensorFormat& mf = *r->master_weights;
      round_role(std::span<T>(s.weights), mf, Role::kMasterWeights, seed, step, sr_keys::kWeightUpdate, &st);
    }
  } else if (r->update_rounding == UpdateRounding::kKahan) {
    // Compensated update (Zamirai et al. 2020) of the intended change delta = target - w:
    // y = delta - c; t = fl(w + y); c = fl((t - w) - y).
    TensorFormat wf = r->weights;
    wf.rounding = Rounding::kNearestEven;
    std::vector<T> y(n);
    for (size_t i = 0; i < n; ++i) {
      y[i] = (target[i] - old[i]) - s.kahan[i];
      s.weights[i] = old[i] + y[i];
    }
    round_role(std::span<T>(s.weights), wf, Role::kMasterWeights, seed, step, sr_keys::kWeightUpdate, &st);
    for (size_t i = 0; i < n; ++i) s.kahan[i] = (s.weights[i] - old[i]) - y[i];
    round_role(std::span<T>(s.kahan), wf, Role::kOptimizerState, seed, step, sr_keys::kWeightUpdateKahan, &st);
  } else {
    TensorFormat wf = r->weights;
    wf.rounding = r->update_rounding == UpdateRounding::kStochastic ? Rounding::kStochastic : Rounding::kNearestEven;
    s.weights = target;
    round_role(std::span<T>(s.weights), wf, Role::kMasterWeights, seed, step, sr_keys::kWeightUpdate, &st);
  }
  for (size_t i = 0; i < n; ++i) {
    if (target[i] == old[i]) continue;
    ++st.updates_intended;
    if (s.weights[i] == old[i]) ++st.updates_lost;
  }
}

template <class T>
void cast_weights(std::vector<T>& out, const std::vector<T>& weights, const Recipe* r,
                  std::span<const ParamRange> autocast_fp32, uint64_t seed, uint64_t step, StepStats* st) {
  out = weights;
  if (!r) return;
  round_role(std::span<T>(out), r->weights, Role::kWeights, seed, step, sr_keys::kWeightCast, st);
  if (!r->autocast) return;
  for (const ParamRange& p : autocast_fp32) std::copy_n(weights.begin() + p.offset, p.count, out.begin() + p.offset);
}

template <class T>
RunState<T> initial_state(const std::vector<double>& params, const Recipe* r) {
  RunState<T> s;
  s.weights.assign(params.begin(), params.end());
  if (r && !r->has_master()) {
    QuantOptions o;  // the initial cast to the stored format rounds to nearest
    quantize(r->weights.format, std::span<const T>(s.weights), std::span<T>(s.weights), o);
  }
  s.kahan.assign(params.size(), T(0));
  s.m.assign(params.size(), T(0));
  s.v.assign(params.size(), T(0));
  s.scaler = LossScaler(r ? r->loss_scaling : LossScaling{});
  return s;
}

template <class T>
void finish_step(RunState<T>& s, std::vector<T>& grads, const Recipe* r, const OptimizerConfig& opt, double lr,
                 uint64_t seed, uint64_t step, StepStats& st, std::vector<T>* grads_out) {
  if constexpr (std::is_same_v<T, float>) {
    st.found_inf = s.scaler.unscale(std::span<float>(grads));
  } else {
    for (T g : grads) st.found_inf |= !std::isfinite(g);
  }
  double sq = 0;
  for (T g : grads) sq += double(g) * double(g);
  st.grad_norm = std::sqrt(sq);
  if (grads_out) *grads_out = grads;
  if (st.found_inf && s.scaler.checks_gradients()) {
    st.skipped = true;
    s.scaler.update(true);
    return;
  }
  if (opt.clip_norm > 0) {
    // clip_grad_norm_: coefficient max_norm / (norm + 1e-6), clamped to 1, applied in the grads' type.
    const double coef = opt.clip_norm / (st.grad_norm + 1e-6);
    if (coef < 1.0)
      for (T& g : grads) g *= static_cast<T>(coef);
  }
  apply_update(s, std::span<const T>(grads), r, opt, lr, seed, step, st);
  s.scaler.update(false);
}

#define PRECSIM_WEIGHT_UPDATE(T)                                                                          \
  template void apply_update<T>(RunState<T>&, std::span<const T>, const Recipe*, const OptimizerConfig&, double,  \
                                uint64_t, uint64_t, StepStats&);                                         \
  template RunState<T> initial_state<T>(const std::vector<double>&, const Recipe*);                         \
  template void cast_weights<T>(std::vector<T>&, const std::vector<T>&, const Recipe*, std::span<const ParamRange>, \
                                uint64_t, uint64_t, StepStats*);                                         \
  template void finish_step<T>(RunState<T>&, std::vector<T>&, const Recipe*, const OptimizerConfig&, double,    \
                               uint64_t, uint64_t, StepStats&, std::vector<T>*);
PRECSIM_WEIGHT_UPDATE(float)
PRECSIM_WEIGHT_UPDATE(double)

}  // namespace precsim

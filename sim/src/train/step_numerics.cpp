#include "precsim/sim/train/step_numerics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "precsim/formats/quantize.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/rounding.h"

namespace precsim {
namespace {

// The products of one recipe: [pass] the recipe's specs, [kGemmPasses + pass] attention's in high
// precision (a model with attention).
std::array<RecipeGemm, 2 * kGemmPasses> recipe_gemms(const Recipe& r, const ModelKeys& keys) {
  std::array<RecipeGemm, 2 * kGemmPasses> g;
  const GemmSpec* specs[kGemmPasses] = {&r.forward, &r.dgrad, &r.wgrad};
  const OperandSpec high{r.activations, Scaling::kNone, 0};
  for (int p = 0; p < kGemmPasses; ++p) {
    const GemmPass pass = static_cast<GemmPass>(p);
    g[p] = RecipeGemm(pass, *specs[p], r.amax_history_len, r.margin);
    if (keys.has_attention())
      g[kGemmPasses + p] = RecipeGemm(pass, GemmSpec{high, high, specs[p]->accum}, r.amax_history_len, r.margin);
  }
  return g;
}

bool same_format(const TensorFormat& a, const TensorFormat& b) { return a.name == b.name && a.rounding == b.rounding; }

}  // namespace

template <class T>
StepNumerics<T>::StepNumerics(const Recipe* r, uint64_t seed, const ModelKeys& keys, int layers)
    : r_(r), seed_(seed), model_keys_(&keys), layers_(layers) {
  if (r) gemms_ = recipe_gemms(*r, keys);
}

template <class T>
void StepNumerics<T>::set_parts(PartRecipes p) {
  parts_ = std::move(p);
  part_gemms_.clear();
  for (int s = 0; s < parts_.slots(); ++s) part_gemms_.push_back(recipe_gemms(parts_.at(s), *model_keys_));
}

template <class T>
void StepNumerics<T>::begin(uint64_t step, StepStats* st) {
  stats_ = st;
  act_grads.clear();
  layer.assign(size_t(layers_), {});
  sumsq_.assign(size_t(layers_), {});
  count_.assign(size_t(layers_), {});
  part(step);
}

template <class T>
void StepNumerics<T>::part(std::span<const uint64_t> keys) {
  keys_.assign(keys.begin(), keys.end());
  tensor_ = 0;
}

template <class T>
void StepNumerics<T>::gemm(const GemmCall& call, T* c, const T* a, const T* b) {
  if constexpr (std::is_same_v<T, double>) gemm_call_f64(call, c, a, b);
  else recipe_gemm(call, c, a, b);
}

template <class T>
void StepNumerics<T>::recipe_gemm(const GemmCall& call, float* c, const float* a, const float* b) {
  const int p = static_cast<int>(call.pass);
  const uint64_t step = keys_[size_t(call.group)];
  const uint32_t role = uint32_t(gemm_operand_role(call.pass));
  const ModelKeys::GemmIds ids = model_keys_->gemm(call, tensor_);
  const size_t slot = ids.delayed_slot;
  if (state->delayed.size() < slot + 2) state->delayed.resize(slot + 2);
  OperandKeys keys;
  keys.a = SrKey{seed_, step, ids.a, role};
  keys.b = SrKey{seed_, step, ids.b, role};
  keys.delayed_a = &state->delayed[slot];
  keys.delayed_b = &state->delayed[slot + 1];
  const int part = parts_.active() ? parts_.gemm_slot(call.layer, call.site) : -1;
  const Recipe& r = part < 0 ? *r_ : parts_.at(part);
  auto& gemms = part < 0 ? gemms_ : part_gemms_[size_t(part)];
  const bool high = model_keys_->attention_product(call.site) && !r.attention.products_in_recipe;
  gemms[(high ? kGemmPasses : 0) + p].run(gemm_call_args(call), call.batch, a, b, c, keys, stats_, executor);
  if (stats_ && call.pass == GemmPass::kForward && call.layer >= 0 && call.layer < layers_ &&
      call.site < model_keys_->observed_sites() && state->delayed[slot])
    layer[size_t(call.layer)].fp8_scale[size_t(call.site)] = state->delayed[slot]->scale();
}

template <class T>
void StepNumerics<T>::round(const RoundAt& at, std::span<T> v) {
  if (!r_) return;
  if (at.point == RoundPoint::kNormOut && r_->autocast) return;  // layer_norm is on autocast's FP32 list
  const uint64_t step = keys_[size_t(at.group)];
  if (parts_.active() && at.point == RoundPoint::kWeightGrad && model_keys_->whole_weight_grads())
    return round_weight_grads_by_part(v, step);
  const Recipe& r = parts_.active() ? parts_.at(parts_.round_slot(model_keys_->part_layer(at))) : *r_;
  const uint32_t id = model_keys_->round(at, tensor_);
  switch (at.point) {
    case RoundPoint::kActivation:
    case RoundPoint::kNormOut: return round_role(v, r.activations, Role::kActivations, seed_, step, id, stats_);
    case RoundPoint::kScores: return round_role(v, r.attention.scores, Role::kActivations, seed_, step, id, stats_);
    case RoundPoint::kActGrad:
      return round_role(v, r.activation_grads, Role::kActivationGrads, seed_, step, id, stats_);
    case RoundPoint::kWeightGrad: return round_role(v, r.weight_grads, Role::kWeightGrads, seed_, step, id, stats_);
  }
}

template <class T>
void StepNumerics<T>::round_weight_grads_by_part(std::span<T> v, uint64_t step) {
  std::vector<T> kept;  // the unrounded gradients of the parts with their own format, in slot order
  auto differs = [&](int s) { return !same_format(parts_.at(s).weight_grads, r_->weight_grads); };
  for (int s = 0; s < parts_.slots(); ++s)
    if (differs(s))
      for (const ParamRange& p : parts_.ranges[size_t(s)])
        kept.insert(kept.end(), v.begin() + p.offset, v.begin() + p.offset + p.count);
  // Statistics count every gradient once, under the recipe's format.
  round_role(v, r_->weight_grads, Role::kWeightGrads, seed_, step, tensor_++, stats_);
  size_t at = 0;
  for (int s = 0; s < parts_.slots(); ++s)
    if (differs(s))
      for (const ParamRange& p : parts_.ranges[size_t(s)]) {
        std::copy_n(kept.begin() + at, p.count, v.begin() + p.offset);
        at += p.count;
        round_role(v.subspan(p.offset, p.count), parts_.at(s).weight_grads, Role::kWeightGrads, seed_, step, tensor_++,
                   nullptr);
      }
}

template <class T>
T StepNumerics<T>::opmath(T x) {
  if (!low_opmath()) return x;
  float f = static_cast<float>(x);
  quantize(r_->activations.format, std::span<const float>(&f, 1), std::span<float>(&f, 1));
  return f;
}

template <class T>
void StepNumerics<T>::reduce_across_groups(std::vector<T>& total, const std::vector<std::vector<T>>& groups) {
  sync_batchnorm_allreduce(total, groups, *parallel);
}

template <class T>
void StepNumerics<T>::observe_scores(int li, std::span<const T> s) {
  if (!stats_) return;
  TransformerLayerStats& L = layer[size_t(li)];
  const double fmax = r_ ? r_->attention.scores.format.max_finite() : INFINITY;
  for (T x : s) {
    if (x == T(0)) continue;  // masked (an exact zero logit counts the same way: it cannot overflow)
    const double m = std::fabs(double(x));
    ++L.score_count;
    L.score_overflow += !(m <= fmax);
    L.score_amax = std::max(L.score_amax, std::isnan(m) ? INFINITY : m);
  }
}

template <class T>
void StepNumerics<T>::observe_linear_input(int site, int li, std::span<const T> x) {
  if (!stats_ || site >= model_keys_->observed_sites()) return;
  double amax = 0, sq = 0;
  for (T e : x) {
    amax = std::max(amax, std::fabs(double(e)));
    sq += double(e) * double(e);
  }
  // Over every micro-batch of the step: the largest |x|, and the RMS of all their elements.
  const size_t l = size_t(li), i = size_t(site);
  sumsq_[l][i] += sq;
  count_[l][i] += double(x.size());
  layer[l].input_amax[i] = std::max(layer[l].input_amax[i], amax);
  layer[l].input_rms[i] = std::sqrt(sumsq_[l][i] / count_[l][i]);
}

template class StepNumerics<float>;
template class StepNumerics<double>;

}  // namespace precsim

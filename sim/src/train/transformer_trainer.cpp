#include "precsim/sim/train/transformer_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {
namespace {

constexpr int kSites = static_cast<int>(TfSite::kCount);
constexpr int kEvalRows = 256;

bool is_attention(TfSite s) { return s == TfSite::kScores || s == TfSite::kAttnV; }

// The recipe's arithmetic (T = float), or exact FP64 (T = double, no recipe), plus the statistics
// of each forward pass.
template <class T>
class StepNumerics final : public TfNumerics<T> {
 public:
  StepNumerics(const Recipe* r, uint64_t seed, int layers) : r_(r), seed_(seed), layers_(layers) {
    if (!r) return;
    const GemmSpec* specs[kGemmPasses] = {&r->forward, &r->dgrad, &r->wgrad};
    const OperandSpec high{r->activations, Scaling::kNone, 0};
    for (int p = 0; p < kGemmPasses; ++p) {
      const GemmPass pass = static_cast<GemmPass>(p);
      gemms_[p] = RecipeGemm(pass, *specs[p], r->amax_history_len, r->margin);
      gemms_[kGemmPasses + p] = RecipeGemm(pass, GemmSpec{high, high, specs[p]->accum}, r->amax_history_len, r->margin);
    }
  }

  RunState<T>* state = nullptr;  // delayed-scaling histories live in the state being stepped
  StepStats* stats = nullptr;    // null: no statistics (evaluation)
  uint64_t step = 0;
  uint32_t tensor = 0;  // counts roundings within a pass: the stochastic-rounding tensor id
  std::vector<T> act_grads;
  std::vector<TransformerLayerStats> layer;

  // A step (or an evaluation chunk) begins: statistics restart.
  void begin(uint64_t s, StepStats* st) {
    stats = st;
    act_grads.clear();
    layer.assign(size_t(layers_), {});
    sumsq_.assign(size_t(layers_), {});
    count_.assign(size_t(layers_), {});
    part(s);
  }
  // The next micro-batch of a step, keyed by its own stochastic-rounding step; statistics go on.
  void part(uint64_t s) {
    step = s;
    tensor = 0;
  }

  void gemm(TfSite site, GemmPass pass, int li, T* c, const T* a, const T* b, int m, int n, int k, int batch) override {
    if constexpr (std::is_same_v<T, double>) {
      stacked_gemm_f64(c, a, b, m, n, k, batch);
    } else {
      const int p = static_cast<int>(pass);
      const bool high = is_attention(site) && !r_->attention.products_in_recipe;
      const size_t slot = sr_keys::transformer_delayed_slot(li, int(site), kSites, pass, 0);
      if (state->delayed.size() < slot + 2) state->delayed.resize(slot + 2);
      OperandKeys keys;
      keys.a = SrKey{seed_, step, tensor++, uint32_t(gemm_operand_role(pass))};
      keys.b = SrKey{seed_, step, tensor++, uint32_t(gemm_operand_role(pass))};
      keys.delayed_a = &state->delayed[slot];
      keys.delayed_b = &state->delayed[slot + 1];
      // Stacked (batch, rows, K) operands: blocks run along K within each row.
      gemms_[(high ? kGemmPasses : 0) + p].run(stacked_gemm_args(m, n, k), batch, a, b, c, keys, stats, nullptr);
      if (stats && pass == GemmPass::kForward && li >= 0 && li < layers_ && site <= TfSite::kFcProj &&
          state->delayed[slot])
        layer[size_t(li)].fp8_scale[size_t(site)] = state->delayed[slot]->scale();
    }
  }

  void round(TfPoint point, int li, std::span<T> v) override {
    (void)li;
    if (point == TfPoint::kActGrad) act_grads.insert(act_grads.end(), v.begin(), v.end());
    if (!r_) return;
    switch (point) {
      case TfPoint::kActivation: return round_role(v, r_->activations, Role::kActivations, seed_, step, tensor++, stats);
      case TfPoint::kNormOut:
        if (r_->autocast) return;  // layer_norm is on autocast's FP32 list
        return round_role(v, r_->activations, Role::kActivations, seed_, step, tensor++, stats);
      case TfPoint::kScores: return round_role(v, r_->attention.scores, Role::kActivations, seed_, step, tensor++, stats);
      case TfPoint::kActGrad:
        return round_role(v, r_->activation_grads, Role::kActivationGrads, seed_, step, tensor++, stats);
      case TfPoint::kWeightGrad: return round_role(v, r_->weight_grads, Role::kWeightGrads, seed_, step, tensor++, stats);
    }
  }

  T opmath(T x) override {
    if (!low_opmath()) return x;
    float f = static_cast<float>(x);
    quantize(r_->activations.format, std::span<const float>(&f, 1), std::span<float>(&f, 1));
    return f;
  }
  bool low_opmath() const override { return r_ && r_->attention.low_opmath; }

  void observe_scores(int li, std::span<const T> s) override {
    if (!stats) return;
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

  void observe_linear_input(TfSite site, int li, std::span<const T> x) override {
    if (!stats || site > TfSite::kFcProj) return;
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

 private:
  const Recipe* r_;
  uint64_t seed_;
  int layers_;
  // (attention products in high precision ? kGemmPasses : 0) + pass.
  std::array<RecipeGemm, 2 * kGemmPasses> gemms_;
  std::vector<std::array<double, 4>> sumsq_, count_;  // per block and linear input, this step
};

}  // namespace

template <class T>
struct TransformerTrainer<T>::Impl {
  TransformerLayout L;
  const Recipe* r;
  OptimizerConfig opt;
  uint64_t seed;
  int64_t total_steps;
  StepNumerics<T> nx;
  TransformerActs<T> acts;
  std::vector<T> wc, grads;
  std::vector<TransformerLayerStats> last_layers;
  GradientSplit<T> split;
  std::vector<ParamRange> norm_params;  // kept in FP32 under autocast

  Impl(const TransformerLayout& l, const Recipe* rec, const OptimizerConfig& o, uint64_t s, int64_t total)
      : L(l), r(rec), opt(o), seed(s), total_steps(total), nx(rec, s, int(l.blocks.size())),
        split(param_tensors(l), l.param_count, rec == nullptr), norm_params(layernorm_params(l)) {}

  // layer_norm runs in FP32 with the FP32 parameters (autocast list).
  static std::vector<ParamRange> layernorm_params(const TransformerLayout& l) {
    std::vector<ParamRange> v;
    for (const BlockSlots& b : l.blocks)
      for (size_t at : {b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b}) v.push_back({at, size_t(l.width)});
    v.push_back({l.lnf_w, size_t(l.width)});
    v.push_back({l.lnf_b, size_t(l.width)});
    return v;
  }

  static std::vector<ParamRange> param_tensors(const TransformerLayout& l) {
    const size_t C = size_t(l.width), H = size_t(l.hidden), V = size_t(l.vocab);
    std::vector<ParamRange> t = {{l.wte, V * C}, {l.wpe, size_t(l.context) * C}};
    for (const BlockSlots& b : l.blocks)
      for (ParamRange p : {ParamRange{b.ln1_w, C}, {b.ln1_b, C}, {b.qkv_w, 3 * C * C}, {b.qkv_b, 3 * C}, {b.proj_w, C * C},
                           {b.proj_b, C}, {b.ln2_w, C}, {b.ln2_b, C}, {b.fc_w, H * C}, {b.fc_b, H},
                           {b.fcproj_w, C * H}, {b.fcproj_b, C}})
        t.push_back(p);
    t.push_back({l.lnf_w, C});
    t.push_back({l.lnf_b, C});
    if (!l.tied) t.push_back({l.head, V * C});
    return t;
  }

  void cast(const RunState<T>& s, uint64_t step, StepStats* st) {
    cast_weights(wc, s.weights, r, norm_params, seed, step, st);
  }

  // Sum of the counted tokens' losses and their number.
  std::pair<double, int64_t> loss_sum(const TokenBatch& b) const {
    double s = 0;
    int64_t n = 0;
    for (int i = 0; i < b.batch * b.seq; ++i)
      if (b.loss_mask[i]) {
        s += double(acts.losses[i]);
        ++n;
      }
    return {s, n};
  }

  // Forward and backward of every micro-batch of every worker, accumulation, all-reduce: grads
  // holds the all-reduced (still loss-scaled) gradient. Returns the token-mean loss of the batch.
  double split_gradient(const SeqBatch& batch, uint64_t step, float scale, StepStats& st) {
    const int seq = L.context, rows = int(batch.tokens.size() / size_t(seq));
    const int mb = split.part_rows(rows), parts = split.parts();
    const int64_t n_total = batch.counted();
    if (n_total == 0) throw std::invalid_argument("a batch without counted tokens: every target is padding");
    const TokenBatch all = batch.view(rows, seq);
    const double divisor = average_divisor(split.parallel());
    split.begin();
    double loss = 0;
    for (int part = 0; part < parts; ++part) {
      const size_t first = size_t(part) * mb * seq;
      TokenBatch sub{all.tokens + first, all.targets + first, all.valid + first, all.loss_mask + first, mb, seq};
      nx.part(sr_keys::part_step(step, part));
      transformer_forward(acts, wc.data(), L, sub, nx);
      const auto [sum, count] = loss_sum(sub);
      loss += sum;
      // Every counted token of the micro-batch weighs the same: scale x D / loss_denominator, the
      // averaging's division D undone in advance.
      const double den = loss_denominator(split.accumulation(), double(n_total), parts, double(count));
      const T dloss = den > 0 ? static_cast<T>(double(scale) * divisor) / static_cast<T>(den) : T(0);
      grads.assign(L.param_count, T(0));
      transformer_backward(grads.data(), acts, wc.data(), L, sub, dloss, nx);
      if (split.single_part_is_final()) return loss / double(n_total);  // grads is final
      split.accumulate(part, grads, seed, step, &st);
    }
    split.allreduce(grads, st);
    return loss / double(n_total);
  }
};

template <class T>
TransformerTrainer<T>::TransformerTrainer(const TransformerLayout& layout, const Recipe* recipe,
                                          const OptimizerConfig& opt, uint64_t sr_seed, int64_t total_steps) {
  if (recipe && !std::is_same_v<T, float>) throw std::logic_error("a recipe runs in FP32 opmath (TransformerTrainer<float>)");
  if (!recipe && !std::is_same_v<T, double>) throw std::logic_error("the reference runs in FP64 (TransformerTrainer<double>)");
  impl_ = std::make_unique<Impl>(layout, recipe, opt, sr_seed, total_steps);
  if (recipe) set_split(recipe->parallel, recipe->accumulation);
}

template <class T>
void TransformerTrainer<T>::set_split(const ParallelSpec& p, const AccumulationSpec& a) {
  impl_->split.set(p, a);
}

template <class T>
TransformerTrainer<T>::~TransformerTrainer() = default;

template <class T>
RunState<T> TransformerTrainer<T>::init_state(const std::vector<double>& params) const {
  return initial_state<T>(params, impl_->r);
}

template <class T>
StepStats TransformerTrainer<T>::step(RunState<T>& s, const SeqBatch& batch, int64_t step, std::vector<T>* grads_out) {
  Impl& I = *impl_;
  StepStats st;
  st.loss_scale = s.scaler.scale();
  I.nx.state = &s;
  I.nx.begin(uint64_t(step), &st);
  I.cast(s, uint64_t(step), &st);
  st.loss = I.split_gradient(batch, uint64_t(step), st.loss_scale, st);
  I.last_layers = I.nx.layer;
  finish_step(s, I.grads, I.r, I.opt, learning_rate(I.opt, step, I.total_steps), I.seed, uint64_t(step), st, grads_out);
  return st;
}

template <class T>
EvalResult TransformerTrainer<T>::evaluate(const RunState<T>& s, const SeqDataset& d) {
  Impl& I = *impl_;
  RunState<T> probe = s.clone();  // evaluation must not advance delayed-scaling histories
  I.nx.state = &probe;
  I.cast(s, sr_keys::kEvalStep, nullptr);
  double loss = 0;
  int64_t counted = 0, correct = 0;
  SeqBatch chunk;
  std::vector<int> idx;
  const int V = I.L.vocab, T_ = d.context;
  for (int start = 0; start < d.heldout_rows; start += kEvalRows) {
    const int n = std::min(kEvalRows, d.heldout_rows - start);
    idx.resize(n);
    for (int i = 0; i < n; ++i) idx[i] = d.train_rows + start + i;
    gather_rows(chunk, d, idx);
    const TokenBatch b = chunk.view(n, T_);
    I.nx.begin(sr_keys::eval_step(uint64_t(start)), nullptr);
    transformer_forward(I.acts, I.wc.data(), I.L, b, I.nx);
    const auto [sum, cnt] = I.loss_sum(b);
    loss += sum;
    counted += cnt;
    for (int i = 0; i < n * T_; ++i) {
      if (!b.loss_mask[i]) continue;
      const T* row = I.acts.logits.data() + size_t(i) * V;
      correct += int(std::max_element(row, row + V) - row) == b.targets[i];
    }
  }
  EvalResult e;
  e.loss = counted ? loss / double(counted) : 0.0;
  e.accuracy = counted ? double(correct) / double(counted) : 0.0;
  return e;
}

template <class T>
const std::vector<T>& TransformerTrainer<T>::last_activation_grads() const {
  return impl_->nx.act_grads;
}

template <class T>
const std::vector<TransformerLayerStats>& TransformerTrainer<T>::last_layer_stats() const {
  return impl_->last_layers;
}

template class TransformerTrainer<float>;
template class TransformerTrainer<double>;

}  // namespace precsim

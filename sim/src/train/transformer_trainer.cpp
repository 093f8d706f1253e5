#include "precsim/sim/train/transformer_trainer.h"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "precsim/sim/train/evaluation.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/trainer_core.h"
#include "precsim/sim/train/weight_update.h"
#include "precsim/sim/train/model_keys.h"

namespace precsim {
namespace {

constexpr int kEvalRows = 256;

}  // namespace

template <class T>
struct TransformerTrainer<T>::Impl : TrainerCore<T> {
  using Core = TrainerCore<T>;
  using Core::grads, Core::nx, Core::seed, Core::split;
  TransformerLayout L;
  TransformerActs<T> acts;
  std::vector<TransformerLayerStats> last_layers;

  Impl(const TransformerLayout& l, const Recipe* rec, const OptimizerConfig& o, uint64_t s, int64_t total)
      : Core(rec, o, s, total, param_tensors(l), l.param_count, layernorm_params(l), transformer_keys(),
             int(l.blocks.size())),
        L(l) {
    // Slots (recipe_parts.h): embedding, per block the block, its attention and its MLP, the head.
    const size_t C = size_t(l.width), H = size_t(l.hidden), V = size_t(l.vocab);
    std::vector<std::vector<ParamRange>> ranges = {{{l.wte, V * C}, {l.wpe, size_t(l.context) * C}}};
    for (const BlockSlots& b : l.blocks) {
      ranges.push_back({{b.ln1_w, C}, {b.ln1_b, C}, {b.ln2_w, C}, {b.ln2_b, C}});
      ranges.push_back({{b.qkv_w, 3 * C * C}, {b.qkv_b, 3 * C}, {b.proj_w, C * C}, {b.proj_b, C}});
      ranges.push_back({{b.fc_w, H * C}, {b.fc_b, H}, {b.fcproj_w, C * H}, {b.fcproj_b, C}});
    }
    ranges.push_back({{l.lnf_w, C}, {l.lnf_b, C}});
    if (!l.tied) ranges.back().push_back({l.head, V * C});
    Core::set_parts(true, int(l.blocks.size()), std::move(ranges));
  }

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
      transformer_forward(acts, this->cast_w.data(), L, sub, nx);
      const auto [sum, count] = loss_sum(sub);
      loss += sum;
      // Every counted token of the micro-batch weighs the same: scale x D / loss_denominator, the
      // averaging's division D undone in advance.
      const double den = loss_denominator(split.accumulation(), double(n_total), parts, double(count));
      const T dloss = den > 0 ? static_cast<T>(double(scale) * divisor) / static_cast<T>(den) : T(0);
      grads.assign(L.param_count, T(0));
      transformer_backward(grads.data(), acts, this->cast_w.data(), L, sub, dloss, nx);
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
  return initial_state<T>(params, impl_->recipe);
}

template <class T>
StepStats TransformerTrainer<T>::step(RunState<T>& s, const SeqBatch& batch, int64_t step, std::vector<T>* grads_out) {
  Impl& I = *impl_;
  return I.step(s, step, grads_out, [&](StepStats& st) {
    const double loss = I.split_gradient(batch, uint64_t(step), st.loss_scale, st);
    I.last_layers = I.nx.layer;
    return loss;
  });
}

template <class T>
EvalResult TransformerTrainer<T>::evaluate(const RunState<T>& s, const SeqDataset& d) {
  Impl& I = *impl_;
  RunState<T> probe = s.clone();  // evaluation must not advance delayed-scaling histories
  I.begin_evaluation(s, probe);
  SeqBatch chunk;
  std::vector<int> idx;
  const int V = I.L.vocab, T_ = d.context;
  return evaluate_in_chunks(d.heldout_rows, kEvalRows, [&](int first, int n, uint64_t key, EvalSums& sums) {
    idx.resize(n);
    for (int i = 0; i < n; ++i) idx[i] = d.train_rows + first + i;
    gather_rows(chunk, d, idx);
    const TokenBatch b = chunk.view(n, T_);
    I.nx.begin(key, nullptr);
    transformer_forward(I.acts, I.cast_w.data(), I.L, b, I.nx);
    const auto [sum, cnt] = I.loss_sum(b);
    sums.loss += sum;
    sums.counted += cnt;
    for (int i = 0; i < n * T_; ++i) {
      if (!b.loss_mask[i]) continue;
      const T* row = I.acts.logits.data() + size_t(i) * V;
      sums.correct += int(std::max_element(row, row + V) - row) == b.targets[i];
    }
  });
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

#include "precsim/sim/train/mlp_trainer.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/model/mlp_pass.h"
#include "precsim/sim/train/evaluation.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/trainer_core.h"
#include "precsim/sim/train/weight_update.h"
#include "precsim/sim/train/model_keys.h"

namespace precsim {

template <class T>
RunState<T> RunState<T>::clone() const {
  RunState c = *this;
  for (auto& d : c.delayed)
    if (d) d = std::make_shared<DelayedScaling>(*d);
  return c;
}

template <class T>
struct Trainer<T>::Impl : TrainerCore<T> {
  using Core = TrainerCore<T>;
  using Core::cast_w, Core::grads, Core::nx, Core::recipe, Core::seed, Core::split;
  MlpLayout layout;
  Task task;
  std::shared_ptr<GemmExecutor> backend;  // null: the emulated gemm()
  MlpActs<T> acts;
  // Row groups of one forward: one, or under SyncBatchNorm one per worker (worker w's micro-batch
  // m), each with its own GEMM calls, stochastic-rounding key and gradient (group_grads).
  std::vector<std::vector<T>> group_grads;
  std::vector<T> row_dloss;  // per-row loss gradients of one forward
  std::vector<double> gathered_x, gathered_targets;
  std::vector<int32_t> gathered_labels;

  Impl(const MlpLayout& l, const Recipe* r, const OptimizerConfig& o, Task t, uint64_t s, int64_t total)
      : Core(r, o, s, total, param_tensors(l), l.param_count, norm_param_ranges(l), mlp_keys(), 0), layout(l),
        task(t) {
    std::vector<std::vector<ParamRange>> ranges;
    for (const auto& s : l.layers) {
      ranges.push_back({{s.w, size_t(s.in) * s.out}, {s.b, size_t(s.out)}});
      if (s.layernorm || s.batchnorm) ranges.back().insert(ranges.back().end(), {{s.ln_w, size_t(s.out)}, {s.ln_b, size_t(s.out)}});
    }
    Core::set_parts(false, int(l.layers.size()), std::move(ranges));
  }

  // The parameter tensors in parameter order (the DDP bucket units).
  static std::vector<ParamRange> param_tensors(const MlpLayout& l) {
    std::vector<ParamRange> t;
    for (const auto& s : l.layers) {
      t.push_back({s.w, size_t(s.in) * s.out});
      t.push_back({s.b, size_t(s.out)});
      if (s.layernorm || s.batchnorm) {
        t.push_back({s.ln_w, size_t(s.out)});
        t.push_back({s.ln_b, size_t(s.out)});
      }
    }
    return t;
  }
  // layer_norm (and here batch_norm) runs in FP32 with the FP32 parameters (autocast list).
  static std::vector<ParamRange> norm_param_ranges(const MlpLayout& l) {
    std::vector<ParamRange> v;
    for (const auto& s : l.layers)
      if (s.layernorm || s.batchnorm) {
        v.push_back({s.ln_w, size_t(s.out)});
        v.push_back({s.ln_b, size_t(s.out)});
      }
    return v;
  }

  bool exact() const { return recipe == nullptr; }

  // keys[g]: the stochastic-rounding step key of row group g (the rows split evenly).
  void forward(const BatchView& bv, std::span<const uint64_t> keys, RunState<T>& s, bool train, bool update) {
    nx.part(keys);
    const BatchNormRunning<T> bn{s.bn_mean.data(), s.bn_var.data(), train, update};
    mlp_forward(acts, cast_w.data(), layout, task, bv, bn, nx);
  }

  // The rows of the given parts (mb rows each) as one batch: a view into b for one part, else a copy.
  BatchView gather_parts(const BatchView& b, std::span<const int> parts, int mb) {
    BatchView v;
    v.rows = mb * int(parts.size());
    if (parts.size() == 1) {
      const size_t first = size_t(parts[0]) * mb;
      v.x = b.x + first * layout.input;
      if (b.labels) v.labels = b.labels + first;
      if (b.targets) v.targets = b.targets + first * layout.output;
      return v;
    }
    gathered_x.clear();
    gathered_labels.clear();
    gathered_targets.clear();
    for (const int p : parts) {
      const size_t first = size_t(p) * mb, last = first + mb;
      gathered_x.insert(gathered_x.end(), b.x + first * layout.input, b.x + last * layout.input);
      if (b.labels) gathered_labels.insert(gathered_labels.end(), b.labels + first, b.labels + last);
      if (b.targets) gathered_targets.insert(gathered_targets.end(), b.targets + first * layout.output, b.targets + last * layout.output);
    }
    v.x = gathered_x.data();
    if (b.labels) v.labels = gathered_labels.data();
    if (b.targets) v.targets = gathered_targets.data();
    return v;
  }

  // Forward and backward of every micro-batch of every worker, accumulation, all-reduce: grads
  // holds the all-reduced (still loss-scaled) gradient. Returns the loss of the global batch.
  double split_gradient(RunState<T>& s, const BatchView& b, uint64_t step, float scale, StepStats& st) {
    const int mb = split.part_rows(b.rows), parts = split.parts();
    const int w_count = split.parallel().workers, n_count = split.accumulation().micro_batches;
    double n_total = 0, loss_sum = 0;
    for (int i = 0; i < b.rows; ++i) n_total += b.items ? b.items[i] : 1.0;
    split.begin();
    // One forward per micro-batch of each worker (part w N + m, in order); under SyncBatchNorm one
    // per micro-batch index m for all workers at once, worker w's micro-batch as row group w.
    const bool sync = split.parallel().batchnorm == BatchNormStats::kSync && w_count > 1 && layout.bn_channels > 0;
    const int groups = sync ? w_count : 1;
    std::vector<int> part(static_cast<size_t>(groups));
    std::vector<uint64_t> keys(static_cast<size_t>(groups));
    row_dloss.resize(size_t(groups) * mb);
    for (int f = 0; f < parts / groups; ++f) {
      for (int g = 0; g < groups; ++g) {
        part[g] = sync ? g * n_count + f : f;
        keys[g] = sr_keys::part_step(step, part[g]);
      }
      // DDP broadcasts rank 0's buffers; SyncBatchNorm's statistics are every rank's.
      forward(gather_parts(b, part, mb), keys, s, true, sync || part[0] < n_count);
      for (int g = 0; g < groups; ++g) add_row_losses(loss_sum, b, part[g], g, mb, n_total, scale);
      nx.act_grads.clear();  // the last backward's
      mlp_backward(group_grads, acts, cast_w.data(), layout, task, row_dloss.data(), nx);
      if (groups == 1) grads.swap(group_grads[0]);
      if (split.single_part_is_final()) return n_total > 0 ? loss_sum / n_total : 0.0;  // grads is final
      for (int g = 0; g < groups; ++g) {
        if (groups > 1) grads.swap(group_grads[g]);
        split.accumulate(part[g], grads, seed, step, &st);
      }
    }
    split.allreduce(grads, st);
    return n_total > 0 ? loss_sum / n_total : 0.0;
  }

  // Row group g (part `part` of b, mb rows) after its forward: adds its items-weighted row losses
  // to loss_sum, row by row (the order of the batch's sum), and sets row_dloss of its rows, the loss
  // each row's gradient comes from with the averaging's division D undone in advance (items_i x D /
  // loss_denominator).
  void add_row_losses(double& loss_sum, const BatchView& b, int part, int g, int mb, double n_total, float scale) {
    auto items = [&](int row) { return b.items ? b.items[row] : 1.0; };
    const int first = part * mb;
    double n_mb = 0;
    for (int i = 0; i < mb; ++i) {
      loss_sum += items(first + i) * static_cast<double>(acts.losses[size_t(g) * mb + i]);
      n_mb += items(first + i);
    }
    const double divisor = average_divisor(split.parallel());
    const double den = loss_denominator(split.accumulation(), n_total, split.parts(), n_mb);
    for (int i = 0; i < mb; ++i)
      row_dloss[size_t(g) * mb + i] =
          den > 0 ? static_cast<T>(double(scale) * items(first + i) * divisor) / static_cast<T>(den) : T(0);
  }
};

template <class T>
Trainer<T>::Trainer(const MlpLayout& layout, const Recipe* recipe, const OptimizerConfig& opt, Task task,
                    uint64_t sr_seed, int64_t total_steps)
    : impl_(std::make_unique<Impl>(layout, recipe, opt, task, sr_seed, total_steps)) {
  if (recipe && !std::is_same_v<T, float>) throw std::logic_error("a recipe runs in FP32 opmath (Trainer<float>)");
  if (recipe) set_split(recipe->parallel, recipe->accumulation);
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
void Trainer<T>::set_split(const ParallelSpec& p, const AccumulationSpec& a) {
  impl_->split.set(p, a);
}

template <class T>
RunState<T> Trainer<T>::init_state(const std::vector<double>& params) const {
  RunState<T> s = initial_state<T>(params, impl_->recipe);
  s.bn_mean.assign(impl_->layout.bn_channels, T(0));
  s.bn_var.assign(impl_->layout.bn_channels, T(1));
  return s;
}

template <class T>
StepStats Trainer<T>::step(RunState<T>& s, const BatchView& b, int64_t step, std::vector<T>* grads_out) {
  return impl_->step(s, step, grads_out,
                     [&](StepStats& st) { return impl_->split_gradient(s, b, uint64_t(step), st.loss_scale, st); });
}

template <class T>
EvalResult Trainer<T>::evaluate(const RunState<T>& s, const BatchView& b) {
  Impl& I = *impl_;
  constexpr int kChunk = 1024;
  RunState<T> probe = s.clone();  // evaluation must not advance delayed-scaling histories
  I.begin_evaluation(s, probe);
  const int f = I.layout.input, o = I.layout.output;
  return evaluate_in_chunks(b.rows, kChunk, [&](int first, int rows, uint64_t key, EvalSums& sums) {
    BatchView c;
    c.rows = rows;
    c.x = b.x + size_t(first) * f;
    if (b.labels) c.labels = b.labels + first;
    if (b.targets) c.targets = b.targets + size_t(first) * o;
    I.forward(c, std::span(&key, 1), probe, false, false);
    for (int i = 0; i < rows; ++i) sums.loss += double(I.acts.losses[i]);
    sums.counted += rows;
    if (I.task != Task::kClassification) return;
    for (int i = 0; i < rows; ++i) {
      const T* row = I.acts.layer_in.back().data() + size_t(i) * o;
      sums.correct += int(std::max_element(row, row + o) - row) == c.labels[i];
    }
  });
}

template <class T>
const std::vector<T>& Trainer<T>::last_activation_grads() const {
  return impl_->nx.act_grads;
}

template <class T>
void Trainer<T>::set_gemm_executor(std::shared_ptr<GemmExecutor> b) {
  if (b && impl_->exact()) throw std::logic_error("the FP64 reference has no GEMM backend");
  impl_->backend = std::move(b);
  impl_->nx.executor = impl_->backend.get();
}

template struct RunState<float>;
template struct RunState<double>;
template class Trainer<float>;
template class Trainer<double>;

}  // namespace precsim

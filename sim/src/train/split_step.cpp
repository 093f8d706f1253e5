#include "precsim/sim/train/split_step.h"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include <stdexcept>

#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {
namespace {

template <class T>
void rank_order_sum(std::vector<T>& out, const std::vector<std::vector<T>>& workers) {
  out = workers[0];
  for (size_t w = 1; w < workers.size(); ++w)
    for (size_t i = 0; i < out.size(); ++i) out[i] += workers[w][i];
}

}  // namespace

double loss_denominator(const AccumulationSpec& a, double global_items, int parts, double micro_items) {
  return a.normalization == LossNormalization::kGlobalItemCount ? global_items : double(parts) * micro_items;
}

template <class T>
void accumulate_gradient(std::vector<T>& buf, std::vector<T>& comp, std::vector<T>& g, const AccumulationSpec& a,
                         bool exact, uint64_t seed, uint64_t step, uint32_t part, StepStats* st) {
  TensorFormat bf;
  bf.name = a.buffer_format_name;
  bf.format = a.buffer_format;
  bf.rounding = a.rounding == BufferRounding::kStochastic ? Rounding::kStochastic : Rounding::kNearestEven;
  if (exact || format_holds_type<T>(bf)) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] += g[i];
    return;
  }
  const uint32_t tensor = sr_keys::grad_accum(part);
  if (a.rounding != BufferRounding::kKahan) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] += g[i];
    round_role(std::span<T>(buf), bf, Role::kGradAccumulation, seed, step, tensor, st);
    return;
  }
  std::vector<T> t(buf.size());
  for (size_t i = 0; i < buf.size(); ++i) {
    g[i] -= comp[i];        // y
    t[i] = buf[i] + g[i];   // t before rounding
  }
  round_role(std::span<T>(t), bf, Role::kGradAccumulation, seed, step, tensor, st);
  for (size_t i = 0; i < buf.size(); ++i) {
    comp[i] = (t[i] - buf[i]) - g[i];
    buf[i] = t[i];
  }
  round_role(std::span<T>(comp), bf, Role::kGradAccumulation, seed, step, tensor, st);
}

template <class T>
bool allreduce_is_identity(const ParallelSpec& p, bool exact) {
  if (p.workers != 1 || p.hook != CompressHook::kNone) return false;
  TensorFormat f;
  f.format = p.format;
  return exact || format_holds_type<T>(f);
}

template void accumulate_gradient(std::vector<float>&, std::vector<float>&, std::vector<float>&,
                                  const AccumulationSpec&, bool, uint64_t, uint64_t, uint32_t, StepStats*);
template void accumulate_gradient(std::vector<double>&, std::vector<double>&, std::vector<double>&,
                                  const AccumulationSpec&, bool, uint64_t, uint64_t, uint32_t, StepStats*);
template bool allreduce_is_identity<float>(const ParallelSpec&, bool);
template bool allreduce_is_identity<double>(const ParallelSpec&, bool);

int average_divisor(const ParallelSpec& p) {
  return p.hook != CompressHook::kNone || p.average != AverageMode::kSum ? p.workers : 1;
}

bool bucketed_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p, QuantStats* stats,
                        uint64_t* nonzero) {
  const size_t n = workers[0].size();
  out.assign(n, 0.0f);
  bool finite = true;
  for (const auto& w : workers)
    for (float v : w) finite &= std::isfinite(v);
  if (!finite) {
    for (const auto& w : workers)
      for (size_t i = 0; i < n; ++i) out[i] += w[i];
    return true;
  }
  AllReduceConfig cfg;
  cfg.workers = p.workers;
  cfg.algorithm = p.algorithm;
  cfg.buffer = p.format;
  cfg.average = p.average;
  cfg.hook = p.hook;
  // DDP buckets hold the gradients' dtype: FP32 under a compression hook, else the buffer format.
  const double elem_bytes = p.hook != CompressHook::kNone ? 4.0 : p.format.bits() / 8.0;
  bool identical = true;
  std::vector<std::vector<float>> flat(workers.size());
  for (const auto& bucket : ddp_buckets(tensors, p.first_bucket_mb, p.bucket_mb, elem_bytes)) {
    for (size_t w = 0; w < workers.size(); ++w) {
      flat[w].clear();
      for (const ParamRange& t : bucket)
        flat[w].insert(flat[w].end(), workers[w].begin() + t.offset, workers[w].begin() + t.offset + t.count);
    }
    const std::vector<std::span<const float>> spans(flat.begin(), flat.end());
    const AllReduceResult r = allreduce(spans, cfg);
    identical &= r.ranks_identical;
    if (stats) *stats += r.stats;
    if (nonzero) *nonzero += r.nonzero_inputs;
    size_t pos = 0;
    for (const ParamRange& t : bucket) {
      std::copy_n(r.reduced.begin() + pos, t.count, out.begin() + t.offset);
      pos += t.count;
    }
  }
  return identical;
}

bool bucketed_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                        const std::vector<ParamRange>&, const ParallelSpec& p, QuantStats*, uint64_t*) {
  rank_order_sum(out, workers);
  const double d = average_divisor(p);
  if (d != 1)
    for (double& v : out) v /= d;
  return true;
}

void sync_batchnorm_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                              const ParallelSpec& p) {
  bool finite = true;
  for (const auto& w : workers)
    for (float v : w) finite &= std::isfinite(v);
  if (!finite) return rank_order_sum(out, workers);
  AllReduceConfig cfg;
  cfg.workers = int(workers.size());
  cfg.algorithm = p.algorithm;
  cfg.buffer = format_by_name("fp32");
  cfg.average = AverageMode::kSum;
  const std::vector<std::span<const float>> spans(workers.begin(), workers.end());
  out = allreduce(spans, cfg).reduced;
}

void sync_batchnorm_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                              const ParallelSpec&) {
  rank_order_sum(out, workers);
}

template <class T>
void GradientSplit<T>::set(const ParallelSpec& p, const AccumulationSpec& a) {
  check_split_counts(p, a);
  par_ = p;
  acc_ = a;
}

template <class T>
int GradientSplit<T>::part_rows(int rows) const {
  if (rows % parts() != 0)
    throw std::invalid_argument(fmt::format("batch {} is not divisible by workers {} x micro-batches {}", rows,
                                            par_.workers, acc_.micro_batches));
  return rows / parts();
}

template <class T>
void GradientSplit<T>::begin() {
  const size_t workers = size_t(par_.workers);
  buffers_.assign(workers, std::vector<T>(param_count_, T(0)));
  compensations_.assign(acc_.rounding == BufferRounding::kKahan ? workers : 0, std::vector<T>(param_count_, T(0)));
}

template <class T>
void GradientSplit<T>::accumulate(int part, std::vector<T>& g, uint64_t seed, uint64_t step, StepStats* st) {
  const size_t w = size_t(part / acc_.micro_batches);
  std::vector<T> no_comp;
  accumulate_gradient(buffers_[w], compensations_.empty() ? no_comp : compensations_[w], g, acc_, exact_, seed, step,
                      uint32_t(part), st);
}

template <class T>
void GradientSplit<T>::allreduce(std::vector<T>& grads, StepStats& st) {
  const size_t ar = size_t(Role::kAllReduce);
  st.ranks_identical = bucketed_allreduce(grads, buffers_, tensors_, par_, &st.roles[ar], &st.role_nonzero[ar]);
}

template class GradientSplit<float>;
template class GradientSplit<double>;

}  // namespace precsim

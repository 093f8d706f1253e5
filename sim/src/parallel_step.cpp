#include "precsim/sim/parallel_step.h"

#include <cmath>
#include <span>

namespace precsim {

int average_divisor(const ParallelSpec& p) {
  return p.hook != CompressHook::kNone || p.average != AverageMode::kSum ? p.workers : 1;
}

bool bucketed_allreduce(std::vector<float>& out, const std::vector<std::vector<float>>& workers,
                        const std::vector<ParamRange>& tensors, const ParallelSpec& p) {
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
    size_t pos = 0;
    for (const ParamRange& t : bucket) {
      std::copy_n(r.reduced.begin() + pos, t.count, out.begin() + t.offset);
      pos += t.count;
    }
  }
  return identical;
}

bool bucketed_allreduce(std::vector<double>& out, const std::vector<std::vector<double>>& workers,
                        const std::vector<ParamRange>&, const ParallelSpec& p) {
  out = workers[0];
  for (size_t w = 1; w < workers.size(); ++w)
    for (size_t i = 0; i < out.size(); ++i) out[i] += workers[w][i];
  const double d = average_divisor(p);
  if (d != 1)
    for (double& v : out) v /= d;
  return true;
}

}  // namespace precsim

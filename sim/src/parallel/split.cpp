#include "precsim/sim/parallel/split.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/name_table.h"
#include "precsim/sim/parallel/split_json.h"

namespace precsim {
namespace {

using nlohmann::json;

constexpr auto kRoundings = name_table<BufferRounding>({{BufferRounding::kNearestEven, "nearest-even"},
                                                        {BufferRounding::kStochastic, "stochastic"},
                                                        {BufferRounding::kKahan, "kahan"}});
constexpr auto kNorms = name_table<LossNormalization>({{LossNormalization::kGlobalItemCount, "global-item-count"},
                                                       {LossNormalization::kMeanPerMicroBatch, "mean-per-micro-batch"}});
constexpr auto kBnStats = name_table<BatchNormStats>({{BatchNormStats::kMicroBatch, "micro-batch"},
                                                      {BatchNormStats::kWorker, "worker"},
                                                      {BatchNormStats::kSync, "sync"}});

Format float_format(const std::string& name, const char* key) {
  std::string err;
  auto f = parse_format(name, &err);
  if (!f) throw std::invalid_argument(fmt::format("{}: {}", key, err));
  if (f->kind != FormatKind::kFloat || !f->is_signed || !f->has_zero)
    throw std::invalid_argument(fmt::format("{} '{}' is not a signed floating-point format with a zero", key, name));
  return *f;
}

// allreduce's parsers name the bad value and the allowed ones; the config key is added here.
template <typename F>
auto with_key(const char* key, F&& parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", key, e.what()));
  }
}

}  // namespace

std::string_view to_string(BufferRounding r) { return kRoundings.name(r); }
std::string_view to_string(LossNormalization n) { return kNorms.name(n); }
std::string_view to_string(BatchNormStats b) { return kBnStats.name(b); }

json parallel_to_json(const ParallelSpec& p) {
  return {{"workers", p.workers},
          {"allreduce", {{"algorithm", to_string(p.algorithm)},
                         {"format", p.format_name},
                         {"average", to_string(p.average)},
                         {"bucket_mb", p.bucket_mb},
                         {"first_bucket_mb", p.first_bucket_mb},
                         {"hook", to_string(p.hook)}}},
          {"batchnorm_stats", to_string(p.batchnorm)}};
}

json accumulation_to_json(const AccumulationSpec& a) {
  return {{"micro_batches", a.micro_batches},
          {"buffer_format", a.buffer_format_name},
          {"rounding", to_string(a.rounding)},
          {"normalization", to_string(a.normalization)}};
}

ParallelSpec parallel_from_json(const json& j) {
  ParallelSpec p;
  p.workers = j.at("workers").get<int>();
  if (p.workers < 1) throw std::invalid_argument(fmt::format("parallel.workers {} must be >= 1", p.workers));
  p.batchnorm = kBnStats.parse(j.at("batchnorm_stats").get<std::string>(), "parallel.batchnorm_stats");
  const json& a = j.at("allreduce");
  p.algorithm = with_key("parallel.allreduce.algorithm",
                         [&] { return parse_allreduce_algorithm(a.at("algorithm").get<std::string>()); });
  p.format_name = a.at("format").get<std::string>();
  p.format = float_format(p.format_name, "parallel.allreduce.format");
  if (!is_allreduce_buffer_format(p.format))
    throw std::invalid_argument(fmt::format(
        "parallel.allreduce.format '{}' is not supported; allowed: fp64, fp32, bf16, fp16, e4m3, e5m2 or a signed float "
        "with a zero and at most 23 mantissa bits",
        p.format_name));
  p.average = with_key("parallel.allreduce.average", [&] { return parse_average_mode(a.at("average").get<std::string>()); });
  p.hook = with_key("parallel.allreduce.hook", [&] { return parse_compress_hook(a.at("hook").get<std::string>()); });
  p.bucket_mb = a.at("bucket_mb").get<double>();
  p.first_bucket_mb = a.at("first_bucket_mb").get<double>();
  if (!(p.bucket_mb > 0) || !std::isfinite(p.bucket_mb))
    throw std::invalid_argument(fmt::format("parallel.allreduce.bucket_mb {} must be > 0", p.bucket_mb));
  if (!(p.first_bucket_mb > 0) || !std::isfinite(p.first_bucket_mb))
    throw std::invalid_argument(fmt::format("parallel.allreduce.first_bucket_mb {} must be > 0", p.first_bucket_mb));
  return p;
}

AccumulationSpec accumulation_from_json(const json& j) {
  AccumulationSpec a;
  a.micro_batches = j.at("micro_batches").get<int>();
  if (a.micro_batches < 1)
    throw std::invalid_argument(fmt::format("accumulation.micro_batches {} must be >= 1", a.micro_batches));
  a.buffer_format_name = j.at("buffer_format").get<std::string>();
  a.buffer_format = float_format(a.buffer_format_name, "accumulation.buffer_format");
  a.rounding = kRoundings.parse(j.at("rounding").get<std::string>(), "accumulation.rounding");
  a.normalization = kNorms.parse(j.at("normalization").get<std::string>(), "accumulation.normalization");
  return a;
}

void check_split(const ParallelSpec& p, const AccumulationSpec& a, int batch, std::string_view variant) {
  const int64_t parts = int64_t(p.workers) * a.micro_batches;
  if (batch % parts != 0)
    throw std::invalid_argument(fmt::format(
        "recipe '{}': batch {} is not divisible by parallel.workers {} x accumulation.micro_batches {} = {}; "
        "the global batch must split into equal micro-batches",
        variant, batch, p.workers, a.micro_batches, parts));
  check_batchnorm_stats(p, a, variant);
}

void check_batchnorm_stats(const ParallelSpec& p, const AccumulationSpec& a, std::string_view variant) {
  if (p.batchnorm == BatchNormStats::kWorker && a.micro_batches > 1)
    throw std::invalid_argument(fmt::format(
        "{}parallel.batchnorm_stats worker needs accumulation.micro_batches 1, got {}: with accumulation each "
        "forward sees one micro-batch; use micro-batch (the same statistics) or sync",
        variant.empty() ? "" : fmt::format("recipe '{}': ", variant), a.micro_batches));
}

void check_split_counts(const ParallelSpec& p, const AccumulationSpec& a) {
  if (p.workers < 1) throw std::invalid_argument(fmt::format("parallel.workers {} must be >= 1", p.workers));
  if (a.micro_batches < 1)
    throw std::invalid_argument(fmt::format("accumulation.micro_batches {} must be >= 1", a.micro_batches));
  check_batchnorm_stats(p, a, "");
}

std::vector<std::vector<ParamRange>> ddp_buckets(const std::vector<ParamRange>& params, double first_bucket_mb,
                                                 double bucket_mb, double element_bytes) {
  std::vector<std::vector<ParamRange>> buckets(1);
  double bytes = 0, cap = first_bucket_mb * 1048576.0;
  for (size_t i = params.size(); i-- > 0;) {
    if (params[i].count == 0) continue;
    buckets.back().push_back(params[i]);
    bytes += double(params[i].count) * element_bytes;
    if (bytes >= cap && i > 0) {
      buckets.emplace_back();
      bytes = 0;
      cap = bucket_mb * 1048576.0;
    }
  }
  if (buckets.back().empty()) buckets.pop_back();
  return buckets;
}

std::string split_keys_doc() {
  return R"(  parallel.workers  data-parallel workers W; each gets batch / W rows of the global batch (1)
  parallel.allreduce.algorithm  ring | tree | naive | fp32-accumulate (ring)
  parallel.allreduce.format     communication buffer: fp64, fp32, bf16, fp16, e4m3, e5m2 (fp8 with a
                    per-tensor scale) (fp32)
  parallel.allreduce.average    ddp (g/W in FP32 into the bucket) | nccl-avg (times 1/W rounded to the
                    buffer) | post-divide (Horovod: sum, then divide) | fsdp (split pre/post divide) |
                    sum (no averaging) (ddp)
  parallel.allreduce.bucket_mb, first_bucket_mb  DDP buckets: whole tensors in reverse parameter
                    order, a bucket closes at its cap; each bucket is all-reduced on its own (25, 1)
  parallel.allreduce.hook       none | bf16 | fp16: DDP compression hook (cast, divide by W, sum in
                    the low format, cast back) (none)
  parallel.batchnorm_stats      model.batchnorm's training statistics: micro-batch (each forward's rows:
                    every micro-batch of every worker; running statistics from worker 0's, as DDP
                    broadcasts rank 0's buffers) | worker (the worker's local batch: the same with
                    micro_batches 1, refused otherwise) | sync (SyncBatchNorm: micro-batch m of all
                    workers together; each worker's mean and variance gathered and combined in rank
                    order in the compute precision, the backward's sums all-reduced in FP32 with the
                    algorithm above; running statistics from the global ones) (micro-batch)
  accumulation.micro_batches    N micro-batches per worker, one optimizer step (1)
  accumulation.buffer_format    format of the gradient accumulation buffer (fp32)
  accumulation.rounding         nearest-even | stochastic | kahan (a compensation buffer in the
                    buffer format) (nearest-even)
  accumulation.normalization    global-item-count (summed loss / items of the whole global batch) |
                    mean-per-micro-batch (the 2024 Hugging Face Trainer bug: mean of per-micro-batch
                    item means) (global-item-count))";
}

}  // namespace precsim

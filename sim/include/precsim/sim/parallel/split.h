// How a variant splits one global batch: W data-parallel workers, each running N micro-batches
// whose gradients are summed in an accumulation buffer, then an all-reduce across the workers
// (docs/reference/sources.md, TC 4 and 5). Part of a Recipe, so one
// report can hold a 1 x 1 variant beside an 8 x 4 one; the FP64 reference is always 1 x 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/parallel/allreduce.h"

namespace precsim {

enum class BufferRounding : uint8_t { kNearestEven, kStochastic, kKahan };

// mean-per-micro-batch is the Hugging Face Trainer's pre-2024-10 behaviour: every micro-batch's
// loss is its own item mean, and those means are averaged. global-item-count divides the summed
// loss by the items of the whole global batch (every micro-batch of every worker).
enum class LossNormalization : uint8_t { kGlobalItemCount, kMeanPerMicroBatch };

// Where BatchNorm layers (model.batchnorm) take their training-mode statistics in a split step:
// micro-batch: over each forward's own rows (each micro-batch of each worker); worker: over the
// worker's local batch, which is its one forward, so only with one micro-batch (with accumulation
// every framework's forward sees one micro-batch); sync: SyncBatchNorm (torch.nn.SyncBatchNorm),
// micro-batch m of every worker normalised over the union of all workers' micro-batch m.
enum class BatchNormStats : uint8_t { kMicroBatch, kWorker, kSync };

struct ParallelSpec {
  int workers = 1;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;
  std::string format_name = "fp32";  // the communication buffer
  Format format = format_by_name("fp32");
  AverageMode average = AverageMode::kDdp;
  double bucket_mb = 25.0;        // DDP bucket_cap_mb
  double first_bucket_mb = 1.0;   // DDP's smaller first bucket
  CompressHook hook = CompressHook::kNone;
  BatchNormStats batchnorm = BatchNormStats::kMicroBatch;
};

struct AccumulationSpec {
  int micro_batches = 1;
  std::string buffer_format_name = "fp32";
  Format buffer_format = format_by_name("fp32");
  BufferRounding rounding = BufferRounding::kNearestEven;
  LossNormalization normalization = LossNormalization::kGlobalItemCount;
};

std::string split_keys_doc();

// Throws std::invalid_argument unless workers x micro_batches divides the global batch, and as
// check_batchnorm_stats.
void check_split(const ParallelSpec& p, const AccumulationSpec& a, int batch, std::string_view variant);
// Throws std::invalid_argument for batchnorm_stats worker with more than one micro-batch.
void check_batchnorm_stats(const ParallelSpec& p, const AccumulationSpec& a, std::string_view variant);
// What every trainer's set_split checks before any batch is known: workers and micro-batches of at
// least 1, and check_batchnorm_stats.
void check_split_counts(const ParallelSpec& p, const AccumulationSpec& a);

// A contiguous run of the flat parameter buffer (one parameter tensor).
struct ParamRange {
  size_t offset = 0, count = 0;
};
// DDP's bucket assignment: whole tensors taken in reverse parameter order; a bucket closes once
// it holds at least its cap (the first bucket's cap is first_bucket_mb, the others bucket_mb),
// elements of `element_bytes` each. Buckets are returned in the order they are all-reduced.
std::vector<std::vector<ParamRange>> ddp_buckets(const std::vector<ParamRange>& params, double first_bucket_mb,
                                                 double bucket_mb, double element_bytes);

std::string_view to_string(BufferRounding);
std::string_view to_string(LossNormalization);
std::string_view to_string(BatchNormStats);

}  // namespace precsim

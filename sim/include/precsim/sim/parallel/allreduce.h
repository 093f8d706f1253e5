// Simulated data-parallel all-reduce: W workers' gradients summed (and averaged) the way NCCL,
// PyTorch DDP, FSDP and Horovod do it, with every hop rounded to the buffer format
// (docs/reference/sources.md, TC 4).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

enum class AllReduceAlgorithm {
  kRing,            // NCCL ring: chunk c is summed (((x_{c+1} + x_{c+2}) + ...) + x_c), one rounding per hop
  kTree,            // balanced binary tree over ranks: sums of equal weight
  kNaive,           // left fold x_0 + x_1 + ... at one rank, then broadcast
  kFp32Accumulate,  // ring order, FP32 accumulator (FP64 for an FP64 buffer), one rounding to the buffer at the end
                    // (NCCL >= 2.28 symmetric kernels)
};

enum class AverageMode {
  kSum,         // no averaging
  kDdp,         // DDP: g * (1/W) in FP32 (FP64 for an FP64 bucket), cast into the bucket, SUM
  kNcclAvg,     // NCCL AVG: x * RN_buf(1/W) in the buffer format before the sum (PreMulSum)
  kPostDivide,  // Horovod: SUM, then divide by W in the buffer format
  kFsdp,        // FSDP: divide by f before the sum and by W/f after it
};

enum class CompressHook { kNone, kBf16, kFp16 };  // DDP bf16/fp16_compress_hook

struct AllReduceConfig {
  int workers = 2;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;
  Format buffer;                 // the communication buffer's format
  AverageMode average = AverageMode::kSum;
  CompressHook hook = CompressHook::kNone;  // overrides buffer with bf16/fp16 and divides before the sum
};

struct AllReduceResult {
  // Rank 0's final values, back in FP32: the buffers hold every value of their format (FP64
  // included), so a buffer wider than FP32 is rounded to FP32 only here, once.
  std::vector<float> reduced;
  bool ranks_identical = true;           // every rank's final buffer has the same bits
  std::vector<std::vector<float>> ranks; // every rank's final buffer (kept for tests; may be cleared)
  double scale = 1.0;                    // per-tensor scale used for FP8 buffers (1 otherwise)
  // Every rounding any rank performed: casts into the buffer (none where the buffer holds FP32),
  // each hop's add, the averaging's FP32 and buffer-format products and quotients, the FP8 scale;
  // nonzero_inputs counts the non-zero finite values entering them.
  QuantStats stats;
  uint64_t nonzero_inputs = 0;
};

// Whether a buffer can hold an all-reduce: a signed float with a zero and at most FP32's 23
// mantissa bits, or FP64 itself (by encoding, so a custom spelling of FP64 counts too).
bool is_allreduce_buffer_format(const Format& f);

// grads[w] is worker w's gradient (all the same length). Throws std::invalid_argument on bad sizes,
// non-finite values or W < 1.
AllReduceResult allreduce(const std::vector<std::span<const float>>& grads, const AllReduceConfig& cfg);

// FSDP's pre-divide factor, PyTorch's loop: f = 1; while (W % f == 0 && W / f > f) f *= 2.
// W = 8 and W = 16 give 4; W = 3 gives 2 (post-divide 1.5).
int fsdp_predivide_factor(int workers);

std::string_view to_string(AllReduceAlgorithm);
std::string_view to_string(AverageMode);
std::string_view to_string(CompressHook);
AllReduceAlgorithm parse_allreduce_algorithm(std::string_view);
AverageMode parse_average_mode(std::string_view);
CompressHook parse_compress_hook(std::string_view);

}  // namespace precsim

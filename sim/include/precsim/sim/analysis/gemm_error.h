// Error of an emulated matrix product against the exact product (long accumulator), on all
// output elements or on a deterministic sample of them for large shapes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/gemm.h"

namespace precsim {

// Flat output indices i * n + j: all of them when m * n <= max_samples, else max_samples distinct
// indices drawn from (seed) in increasing order.
std::vector<int64_t> sample_outputs(int64_t m, int64_t n, int64_t max_samples, uint64_t seed);

struct ExactSample {
  std::vector<int64_t> index;
  std::vector<double> exact;      // the exact value rounded to nearest FP64
  std::vector<double> exact_out;  // the exact value correctly rounded (nearest-even) into out
};
// Exact op(A) op(B) (alpha = 1, beta = 0) at the sampled outputs; layout as in GemmArgs.
ExactSample exact_gemm_sample(const GemmArgs& g, const float* a, const float* b,
                              const std::vector<int64_t>& index, const Format& out);

// Upper edges of the |ulp error| histogram buckets; the last bucket holds everything larger.
inline constexpr std::array<int64_t, 7> kUlpBucketEdges = {0, 1, 2, 4, 8, 16, 256};

struct GemmErrorStats {
  uint64_t count = 0;
  uint64_t exact_zero = 0;      // samples whose exact value is 0 (left out of relative errors)
  uint64_t nonfinite = 0;       // model gave NaN or Inf where the exact value is finite
  // Samples whose exact value is NaN or Inf (NaN or Inf operands): no error is defined there, so
  // they are left out of every error below, and a product with no finite sample has NaN errors.
  uint64_t exact_nonfinite = 0;
  double max_rel = 0, mean_rel = 0;
  double max_abs = 0;
  double normwise = 0;          // ||C - C_exact||_F / ||C_exact||_F over the finite samples
  int64_t max_ulp = 0;          // |ulps| from the correctly rounded exact value, in out
  double mean_ulp = 0;
  std::array<uint64_t, kUlpBucketEdges.size() + 1> ulp_hist{};  // |ulps| <= edge, ..., > last
};
// c: the model's M x N output (row-major, ld n), values of out.
GemmErrorStats measure_error(const ExactSample& s, const double* c, const Format& out);
nlohmann::json to_json(const GemmErrorStats& e);

}  // namespace precsim

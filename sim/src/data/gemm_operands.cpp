#include "precsim/sim/data/gemm_operands.h"

#include <cmath>
#include <stdexcept>

#include "precsim/sim/core/random.h"
#include "precsim/sim/data/distributions.h"

namespace precsim {
namespace {

// The second half of K repeats A's first half and negates B's, plus a small perturbation.
void cancelling_operand(bool is_b, int64_t rows, int64_t cols, uint64_t seed, uint64_t stream, std::vector<float>& out) {
  const int64_t half = is_b ? rows / 2 : cols / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t p = is_b ? r : c;  // the K index
      const int64_t q = p < half ? p : p - half;
      const int64_t src = is_b ? q * cols + c : r * cols + q;
      double v = standard_normal(seed, stream, static_cast<uint64_t>(src));
      if (is_b && p >= half && p - half < half) v = -v + std::ldexp(standard_normal(seed, 7, src), -8);
      out[r * cols + c] = static_cast<float>(v);
    }
  }
}

}  // namespace

void generate_gemm_operand(const std::string& dist, bool is_b, int64_t rows, int64_t cols, uint64_t seed,
                           std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  const uint64_t stream = is_b ? 2 : 1;
  if (dist == "normal") {
    fill_normal(out, seed, stream);
  } else if (dist == "wide") {
    for (size_t i = 0; i < out.size(); ++i) {
      const int e = static_cast<int>(std::floor(uniform01(seed, stream + 10, i) * 21)) - 10;
      out[i] = static_cast<float>(std::ldexp(standard_normal(seed, stream, i), e));
    }
  } else if (dist == "cancel") {
    cancelling_operand(is_b, rows, cols, seed, stream, out);
  } else {
    Distribution d;
    try {
      d = parse_distribution(dist);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(e.what()) + "; allowed: " + kGemmOperandDists);
    }
    generate(d, out, seed ^ (is_b ? 0x9e3779b97f4a7c15ULL : 0));
  }
}

std::vector<std::vector<float>> generate_worker_gradients(int workers, size_t elements, uint64_t seed, double mean,
                                                          double stddev) {
  std::vector<std::vector<float>> g(workers, std::vector<float>(elements));
  for (int p = 0; p < workers; ++p) fill_normal(g[p], seed, static_cast<uint64_t>(p), mean, stddev);
  return g;
}

}  // namespace precsim

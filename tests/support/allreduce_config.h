// The all-reduce tests' shorthands: workers' gradients as spans, and a configuration by names.
#pragma once

#include <span>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/parallel/allreduce.h"

namespace precsim::test_support {

inline std::vector<std::span<const float>> spans(const std::vector<std::vector<float>>& g) {
  return {g.begin(), g.end()};
}

inline AllReduceConfig config(int w, AllReduceAlgorithm a, const char* fmt, AverageMode avg = AverageMode::kSum) {
  AllReduceConfig c;
  c.workers = w;
  c.algorithm = a;
  c.buffer = format_by_name(fmt);
  c.average = avg;
  return c;
}

}  // namespace precsim::test_support

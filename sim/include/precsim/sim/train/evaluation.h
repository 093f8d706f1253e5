// The evaluation loop of every trainer: the held-out rows in chunks, each forward keyed by
// sr_keys::eval_step(its first row), losses and correct predictions summed over the counted items.
#pragma once

#include <algorithm>
#include <cstdint>

#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// What the chunks add up: the sum of the counted items' losses (in the order the model adds them),
// their number, and the correct predictions among them.
struct EvalSums {
  double loss = 0;
  int64_t counted = 0;
  int64_t correct = 0;
};

// run(first, rows, key, sums) forwards rows [first, first + rows) with stochastic-rounding step key
// `key` and adds to sums. Returns the mean loss and accuracy over the counted items (0 without any).
template <class Run>
EvalResult evaluate_in_chunks(int rows, int chunk_rows, Run&& run) {
  EvalSums sums;
  for (int first = 0; first < rows; first += chunk_rows)
    run(first, std::min(chunk_rows, rows - first), sr_keys::eval_step(uint64_t(first)), sums);
  EvalResult e;
  e.loss = sums.counted ? sums.loss / double(sums.counted) : 0.0;
  e.accuracy = sums.counted ? double(sums.correct) / double(sums.counted) : 0.0;
  return e;
}

}  // namespace precsim

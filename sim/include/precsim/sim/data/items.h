// Items per training row, for loss normalisation: a row stands for a sequence of items (tokens)
// of which some may be masked (padding). Loss = sum_i items_i * loss_i / sum_i items_i, so that
// micro-batches with unequal item counts make the per-micro-batch mean (the Hugging Face bug)
// differ from the global item count. The default, one item per row, is the plain batch mean.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace precsim {

struct ItemsConfig {
  double mask_fraction = 0.0;  // fraction of rows whose items are all masked (weight 0)
  int min_per_row = 1;         // unmasked rows carry a keyed uniform integer count in [min, max]
  int max_per_row = 1;
  bool unit() const { return mask_fraction == 0.0 && min_per_row == 1 && max_per_row == 1; }
};

// items[r] for every training row r, keyed by (seed, row): the same row always has the same count.
std::vector<double> row_item_counts(const ItemsConfig& c, int rows, uint64_t seed);


}  // namespace precsim

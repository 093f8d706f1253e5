#include "precsim/sim/data/items.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/random.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/data/data_json.h"

namespace precsim {
namespace {
constexpr uint64_t kMaskStream = 7001, kCountStream = 7002;
}

std::vector<double> row_item_counts(const ItemsConfig& c, int rows, uint64_t seed) {
  std::vector<double> items(size_t(rows), 1.0);
  if (c.unit()) return items;
  const int span = c.max_per_row - c.min_per_row + 1;
  for (int r = 0; r < rows; ++r) {
    if (uniform01(seed, kMaskStream, uint64_t(r)) < c.mask_fraction) {
      items[r] = 0.0;
      continue;
    }
    const int k = std::min(span - 1, int(std::floor(uniform01(seed, kCountStream, uint64_t(r)) * span)));
    items[r] = double(c.min_per_row + k);
  }
  return items;
}

nlohmann::json items_config_to_json(const ItemsConfig& c) {
  return {{"mask_fraction", c.mask_fraction}, {"min_per_row", c.min_per_row}, {"max_per_row", c.max_per_row}};
}

ItemsConfig items_config_from_json(const nlohmann::json& j) {
  const nlohmann::json m = merge_config(items_config_to_json(ItemsConfig{}), j, "items");
  ItemsConfig c;
  c.mask_fraction = m["mask_fraction"].get<double>();
  c.min_per_row = m["min_per_row"].get<int>();
  c.max_per_row = m["max_per_row"].get<int>();
  if (!(c.mask_fraction >= 0 && c.mask_fraction < 1))
    throw std::invalid_argument(fmt::format("items.mask_fraction {} must be in [0, 1)", c.mask_fraction));
  if (c.min_per_row < 1) throw std::invalid_argument(fmt::format("items.min_per_row {} must be >= 1", c.min_per_row));
  if (c.max_per_row < c.min_per_row)
    throw std::invalid_argument(
        fmt::format("items.max_per_row {} must be >= items.min_per_row {}", c.max_per_row, c.min_per_row));
  return c;
}

}  // namespace precsim

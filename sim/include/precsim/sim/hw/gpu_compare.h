// Device results against the emulation: bit-for-bit agreement statistics, the operand sets that
// exercise the corners of the block-FMA model, and the ranking of emulation presets by how well
// they reproduce a device GEMM.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim {

struct MatchStats {
  uint64_t count = 0;
  uint64_t exact = 0;              // identical values (NaN matches NaN; +0 and -0 differ)
  double exact_fraction = 0;
  int64_t max_ulp = 0;             // largest distance in units of `out` (ordinals); NaN mismatches excluded
  uint64_t nan_mismatches = 0;     // NaN on one side only
  int64_t first_mismatch = -1;     // index, or -1
  double first_device = 0, first_emulated = 0;
};

// Both spans hold values of `out` (throws std::invalid_argument when a value is not one, or when
// the lengths differ).
MatchStats compare_results(const Format& out, std::span<const double> device, std::span<const double> emulated);
nlohmann::json to_json(const MatchStats& s);

// Operand sets (row-major A m x k, row-major B k x n; every value a finite value of its format).
enum class OperandSet {
  kRandom,        // standard normal values, rounded
  kWideExponent,  // magnitudes spread over many binades: products far below the largest in a block
  kCancellation,  // pairs of products that cancel up to the last bits: the result is tiny
  kAlignment,     // one large product per 8 and small ones 2^-20..2^-30 below it: the truncation corners
};
const std::vector<std::string>& operand_set_names();
OperandSet parse_operand_set(std::string_view name);  // throws std::invalid_argument listing names
std::string_view to_string(OperandSet s);

void make_operands(OperandSet set, const Format& fa, const Format& fb, int64_t m, int64_t n, int64_t k,
                   uint64_t seed, std::vector<float>& a, std::vector<float>& b);

// The presets worth comparing with a device GEMM on these input formats, in display order.
std::vector<std::string> candidate_presets(const Format& in, bool fp16_accumulation);

struct PresetScore {
  std::string preset;
  MatchStats stats;
};
// Best first: most exact matches, then smallest max_ulp, then the given order.
std::vector<PresetScore> rank_presets(std::vector<PresetScore> scores);

}  // namespace precsim

// The JSON of a train report's results, apart from the stepping: a seed's reference and variant
// summaries (from the runs of seed_run.h), the rounding statistics per role, the aggregation of the
// variants' summaries over seeds, and the summary table.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/sim/train/step_types.h"

namespace precsim {

constexpr size_t kRoles = static_cast<size_t>(Role::kCount);

// Mean of the values (0 for none): a loss or error over the last window of steps.
double window_mean(const std::vector<double>& v);

// Per role with any rounding: counts, flush and subnormal fractions (reports/METRICS.md).
nlohmann::json roles_json(const RoleStats& r, const std::array<uint64_t, kRoles>& nz);

// What the summary of one variant in one seed is made of.
struct VariantSummaryInput {
  double final_loss = 0, heldout_loss = 0, heldout_accuracy = 0;
  double ref_final = 0, ref_heldout_loss = 0, ref_heldout_accuracy = 0;
  double weight_distance = 0, chaos_floor = 0;
  const std::vector<double>* local_grad_err = nullptr;
  const std::vector<double>* local_grad_cos = nullptr;
  const std::vector<double>* local_update_err = nullptr;
  const std::vector<double>* local_underflow = nullptr;
  const std::vector<double>* split_grad_err = nullptr;
  const std::vector<double>* split_grad_cos = nullptr;
  const RoleStats* roles = nullptr;
  const std::array<uint64_t, kRoles>* nonzero = nullptr;
  uint64_t intended = 0, lost = 0, skipped = 0;
  float final_loss_scale = 1.0f;
  int64_t diverged_at = -1;
};
nlohmann::json variant_summary_json(const VariantSummaryInput& in);

// The delayed-scaling state of a variant at the end: per operand slot its scale and last amax.
nlohmann::json fp8_delayed_json(const RunState<float>& s);

// The results' "variants": per recipe the mean over seeds of every summary number (and its 95%
// interval over several seeds), diverged_at per seed, the split and the memory estimate.
nlohmann::json aggregate_variants(const std::vector<Recipe>& recipes, const nlohmann::json& runs, int seeds,
                                  const std::vector<nlohmann::json>& memory);

}  // namespace precsim

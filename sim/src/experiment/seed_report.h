// A train report's results apart from the stepping: a seed's variant summary (from the runs of
// seed_run.h), the delayed-scaling state, and the aggregation of the variants' summaries over
// seeds; and the summary table of a results object.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "precsim/sim/experiment/train_results.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// Mean of the values (0 for none): a loss or error over the last window of steps.
double window_mean(const std::vector<double>& v);

// What the summary of one variant in one seed is made of.
struct VariantSummaryInput {
  double final_loss = 0, heldout_loss = 0, heldout_accuracy = 0;
  double ref_final = 0, ref_heldout_loss = 0, ref_heldout_accuracy = 0;
  double weight_distance = 0, chaos_floor = 0;
  const LocalSeries* local = nullptr;
  const RoleStats* roles = nullptr;
  const std::array<uint64_t, kRoles>* nonzero = nullptr;
  uint64_t intended = 0, lost = 0, skipped = 0;
  float final_loss_scale = 1.0f;
  int64_t diverged_at = -1;
};
VariantSummary variant_summary(const VariantSummaryInput& in);

// The delayed-scaling state of a variant at the end: per operand slot its scale and last amax.
std::vector<Fp8DelayedScale> fp8_delayed_scales(const RunState<float>& s);

// Per recipe the mean over the seeds that ran of every summary number (and its 95% interval),
// diverged_at per seed, the split and the memory estimate.
std::vector<VariantAggregate> aggregate_variants(const std::vector<Recipe>& recipes, const std::vector<SeedResults>& runs,
                                                 const std::vector<MemoryEstimate>& memory);

}  // namespace precsim

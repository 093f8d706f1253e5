// What run_training computes, as structs: per seed the reference's and every variant's summary
// numbers, series and statistics, and per variant the aggregation over seeds. The JSON of a train
// report's results is written from these in one place (train_results_json.cpp); callers that want
// numbers read the fields. Series hold one value per logged (or shadow, or evaluation) step; all
// columns of a series have the same length, and an empty series is written as {}.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

constexpr size_t kRoles = static_cast<size_t>(Role::kCount);

// The reference's series at logged steps.
struct ReferenceSeries {
  std::vector<double> step, loss, chaos_loss, chaos_weight_distance, grad_norm;
};
// Held-out evaluations; step is the number of steps taken.
struct EvalSeries {
  std::vector<double> step, heldout_loss, heldout_accuracy;
};
// A variant's series at logged steps.
struct VariantSeries {
  std::vector<double> step, loss, loss_gap, weight_distance, drift_over_chaos_floor, grad_cosine_vs_reference,
      loss_scale, skipped_steps, stagnation;
};
// A variant's local errors at shadow steps (the split errors are 0 and 1 for an unsplit recipe).
struct LocalSeries {
  std::vector<double> step, grad_rel_err, grad_cosine, update_rel_err, weight_grad_underflow_vs_reference,
      split_grad_rel_err, split_grad_cosine;
};
// A variant's twin on another GEMM executor, against the emulated variant, at logged steps.
struct TwinSeries {
  std::vector<double> step, loss, loss_diff, weight_rel_err, loss_scale;
};

// One transformer block's statistics at logged steps; the four linear products' inputs are in
// the order qkv, proj, fc, fcproj.
struct BlockSeries {
  std::vector<double> attn_logit_amax, attn_logit_overflow_fraction;
  std::array<std::vector<double>, 4> input_max_over_rms, input_fp8_scale;
};
// Per-layer statistics of models that have them (the transformer).
struct LayerSeries {
  std::vector<int64_t> step;
  std::vector<BlockSeries> blocks;
};

// Gradient exponent histograms at one step (analysis/metrics.h's exponent_histogram).
struct GradHistograms {
  int64_t step = 0;
  nlohmann::json activation_grads, weight_grads_unscaled;
};

// A delayed-scaling operand slot at the end of the run.
struct Fp8DelayedScale {
  size_t operand = 0;
  double scale = 0, last_amax = 0;
};

// The summary of one variant in one seed (docs/reference/metrics.md).
struct VariantSummary {
  double final_loss = 0, heldout_loss = 0, heldout_accuracy = 0;
  double loss_gap = 0, heldout_loss_gap = 0, heldout_accuracy_gap = 0;
  double local_grad_rel_err = 0, local_grad_cosine = 0, local_update_rel_err = 0, local_weight_grad_underflow = 0;
  double local_split_grad_rel_err = 0, local_split_grad_cosine = 1;
  double weight_distance = 0, chaos_floor = 0, drift_over_chaos_floor = 0;
  double underflow_fraction = 0, stagnation_fraction = 0;
  uint64_t skipped_steps = 0;
  double final_loss_scale = 1;
  std::optional<int64_t> diverged_at;  // the step at which the variant diverged
};

// The summary numbers a seed's summary and the aggregation over seeds share, by their JSON keys
// (diverged_at, which is not averaged, apart).
constexpr size_t kSummaryNumbers = 19;
extern const std::array<const char*, kSummaryNumbers> kSummaryNumberNames;
std::array<double, kSummaryNumbers> summary_numbers(const VariantSummary& s);

// A variant's twin (RunHooks::gemm_executor): its summary, series and the executor's call report.
struct TwinResults {
  std::string name;
  double last_loss = 0, max_abs_loss_diff = 0, max_weight_rel_err = 0, final_weight_rel_err = 0;
  uint64_t skipped_steps = 0;
  std::optional<int64_t> diverged_at;
  TwinSeries series;
  nlohmann::json calls;  // the executor's own report (GemmExecutor::report)
};

// One variant in one seed.
struct VariantRunResults {
  std::string name;
  VariantSummary summary;
  RoleStats roles{};                       // rounding statistics per role
  std::array<uint64_t, kRoles> nonzero{};  // non-zero inputs per role
  VariantSeries series;
  LocalSeries local;
  EvalSeries evals;
  std::vector<GradHistograms> histograms;
  std::vector<Fp8DelayedScale> fp8_delayed_scales;
  std::optional<LayerSeries> layers;
  std::optional<TwinResults> backend;
};

struct ReferenceResults {
  double final_loss = 0, last_loss = 0, initial_loss = 0, heldout_loss = 0, heldout_accuracy = 0, chaos_floor = 0;
  ReferenceSeries series;
  EvalSeries evals;
};

// One seed of the experiment.
struct SeedResults {
  uint64_t seed = 0;
  int64_t steps_completed = 0;
  ReferenceResults reference;
  std::vector<VariantRunResults> variants;
};

// Bytes per worker of a recipe (runner.h's memory_estimate).
struct MemoryEstimate {
  double weights = 0, master_weights = 0, kahan_compensation = 0, gradients = 0, optimizer_state = 0,
         accumulation_buffer = 0, activations_one_batch = 0, activations_one_micro_batch = 0,
         gemm_operand_scales_per_element_bytes = 0, total = 0;
};

// A variant over every seed that ran: the mean and 95% interval of each summary number, the
// divergence step per seed, its split and its memory estimate.
struct VariantAggregate {
  std::string name, preset;
  std::array<MeanCi, kSummaryNumbers> summary{};
  std::vector<std::optional<int64_t>> diverged_at;  // per seed that ran
  int workers = 1, micro_batches = 1;
  MemoryEstimate memory_bytes;
};

struct TrainResults {
  size_t parameters = 0;
  int seeds = 1;  // the configured seeds (the runs may hold fewer when the run was stopped)
  std::vector<VariantAggregate> variants;
  std::vector<SeedResults> runs;
};

// The JSON edge: the results object of a train report (docs/reference/metrics.md), and its parts.
nlohmann::json train_results_json(const TrainResults& r);
nlohmann::json variant_summary_json(const VariantSummary& s);
// The --jsonl record of a variant's last logged step: {"seed", "step", "variant", series values}.
nlohmann::json logged_step_json(const VariantSeries& s, uint64_t seed, int64_t step, const std::string& variant);

// So that a json may be assigned from the structs (nlohmann's to_json convention).
inline void to_json(nlohmann::json& j, const TrainResults& r) { j = train_results_json(r); }
inline void to_json(nlohmann::json& j, const VariantSummary& s) { j = variant_summary_json(s); }
void to_json(nlohmann::json& j, const MemoryEstimate& m);

}  // namespace precsim

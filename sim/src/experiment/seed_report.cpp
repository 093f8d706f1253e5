#include "seed_report.h"

#include <fmt/format.h>

#include <array>
#include <utility>
#include <vector>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/formats/block_scaling.h"

namespace precsim {

using nlohmann::json;

const std::array<const char*, kSummaryNumbers> kSummaryNumberNames = {
    "final_loss",         "heldout_loss",       "heldout_accuracy",
    "loss_gap",           "heldout_loss_gap",   "heldout_accuracy_gap",
    "local_grad_rel_err", "local_grad_cosine",  "local_update_rel_err",
    "local_weight_grad_underflow", "local_split_grad_rel_err",
    "local_split_grad_cosine", "weight_distance", "chaos_floor",
    "drift_over_chaos_floor", "underflow_fraction", "stagnation_fraction",
    "skipped_steps",      "final_loss_scale"};

std::array<double, kSummaryNumbers> summary_numbers(const VariantSummary& s) {
  return {s.final_loss,         s.heldout_loss,       s.heldout_accuracy,
          s.loss_gap,           s.heldout_loss_gap,   s.heldout_accuracy_gap,
          s.local_grad_rel_err, s.local_grad_cosine,  s.local_update_rel_err,
          s.local_weight_grad_underflow, s.local_split_grad_rel_err,
          s.local_split_grad_cosine, s.weight_distance, s.chaos_floor,
          s.drift_over_chaos_floor, s.underflow_fraction, s.stagnation_fraction,
          double(s.skipped_steps), s.final_loss_scale};
}

double window_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

VariantSummary variant_summary(const VariantSummaryInput& v) {
  uint64_t gflush = 0, gnz = 0;
  for (Role r : {Role::kActivationGrads, Role::kWeightGrads}) {
    gflush += (*v.roles)[size_t(r)].underflow_to_zero;
    gnz += (*v.nonzero)[size_t(r)];
  }
  const LocalSeries& l = *v.local;
  VariantSummary s;
  s.final_loss = v.final_loss;
  s.heldout_loss = v.heldout_loss;
  s.heldout_accuracy = v.heldout_accuracy;
  s.loss_gap = v.final_loss - v.ref_final;
  s.heldout_loss_gap = v.heldout_loss - v.ref_heldout_loss;
  s.heldout_accuracy_gap = v.heldout_accuracy - v.ref_heldout_accuracy;
  s.local_grad_rel_err = window_mean(l.grad_rel_err);
  s.local_grad_cosine = window_mean(l.grad_cosine);
  s.local_update_rel_err = window_mean(l.update_rel_err);
  s.local_weight_grad_underflow = window_mean(l.weight_grad_underflow_vs_reference);
  s.local_split_grad_rel_err = window_mean(l.split_grad_rel_err);
  s.local_split_grad_cosine = l.split_grad_cosine.empty() ? 1.0 : window_mean(l.split_grad_cosine);
  s.weight_distance = v.weight_distance;
  s.chaos_floor = v.chaos_floor;
  s.drift_over_chaos_floor = v.weight_distance / v.chaos_floor;
  s.underflow_fraction = gnz ? double(gflush) / double(gnz) : 0.0;
  s.stagnation_fraction = v.intended ? double(v.lost) / double(v.intended) : 0.0;
  s.skipped_steps = v.skipped;
  s.final_loss_scale = v.final_loss_scale;
  if (v.diverged_at >= 0) s.diverged_at = v.diverged_at;
  return s;
}

std::vector<Fp8DelayedScale> fp8_delayed_scales(const RunState<float>& s) {
  std::vector<Fp8DelayedScale> fp8;
  for (size_t i = 0; i < s.delayed.size(); ++i)
    if (s.delayed[i]) {
      const auto& h = s.delayed[i]->history();
      fp8.push_back({i, s.delayed[i]->scale(), h.empty() ? 0.0 : h.front()});
    }
  return fp8;
}

std::vector<VariantAggregate> aggregate_variants(const std::vector<Recipe>& recipes, const std::vector<SeedResults>& runs,
                                                 const std::vector<MemoryEstimate>& memory) {
  std::vector<VariantAggregate> variants;
  for (size_t vi = 0; vi < recipes.size(); ++vi) {
    VariantAggregate v;
    std::vector<std::array<double, kSummaryNumbers>> per_seed;
    for (const SeedResults& run : runs) per_seed.push_back(summary_numbers(run.variants[vi].summary));
    for (size_t k = 0; k < kSummaryNumbers; ++k) {
      std::vector<double> xs;
      for (const auto& x : per_seed) xs.push_back(x[k]);
      v.summary[k] = mean_ci95(xs);
    }
    for (const SeedResults& run : runs) v.diverged_at.push_back(run.variants[vi].summary.diverged_at);
    v.name = recipes[vi].name;
    v.preset = recipes[vi].preset;
    v.workers = recipes[vi].parallel.workers;
    v.micro_batches = recipes[vi].accumulation.micro_batches;
    v.memory_bytes = memory[vi];
    variants.push_back(std::move(v));
  }
  return variants;
}

// at() rather than [] throughout: the table is also printed from a report read back from disk
// (report summary), where a missing key must throw, not read past the object.
std::string split_table(const nlohmann::json& results) {
  std::string t;
  bool any_split = false;
  for (const auto& v : results.at("variants"))
    any_split |= v.contains("split") && v.at("split").at("workers").get<int>() * v.at("split").at("micro_batches").get<int>() > 1;
  if (!any_split) return t;
  t += fmt::format("\n{:<20} {:>9} {:>12} {:>14} {:>14} {:>14}\n", "variant", "W x N", "split_err", "split_cosine",
                   "act_bytes_mb", "act_bytes_all");
  for (const auto& v : results.at("variants")) {
    const auto& s = v.at("summary");
    t += fmt::format("{:<20} {:>9} {:>12.3g} {:>14.8f} {:>14.0f} {:>14.0f}\n", v.at("name").get<std::string>(),
                     fmt::format("{} x {}", v.at("split").at("workers").get<int>(), v.at("split").at("micro_batches").get<int>()),
                     read_number(s.at("local_split_grad_rel_err")), read_number(s.at("local_split_grad_cosine")),
                     v.at("memory_bytes").at("activations_one_micro_batch").get<double>(),
                     v.at("memory_bytes").at("activations_one_batch").get<double>());
  }
  return t;
}

}  // namespace precsim

// `precsim report compare`: two variants of one train report compared seed by seed. Both ran on
// the same data, initial weights and batches of each seed, so the per-seed difference cancels
// what the seed alone moves; what is left is judged against the spread of those differences
// (seed noise) and against the chaos floor, the change a one-ulp perturbation of the initial
// weights makes to the same metric (docs/reference/metrics.md, "Comparing two recipes").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace precsim {

enum class CompareVerdict {
  kOneSeed,          // one seed: no interval, no verdict
  kSeedNoise,        // the 95% interval of the mean difference contains 0
  kChaosFloor,       // the interval excludes 0 but |mean| is within the chaos floor
  kDifferent,        // the interval excludes 0 and |mean| exceeds the chaos floor
};

struct RecipeComparison {
  std::string a, b, metric;
  std::vector<unsigned long long> seeds;
  std::vector<double> value_a, value_b, diff;  // per seed; diff = b - a
  double mean = 0, lo = 0, hi = 0;            // mean of diff and its 95% interval (Student's t)
  // Mean over seeds of the chaos floor in the metric's units; negative when the report holds
  // no chaos counterpart for the metric (the verdict then rests on seed noise alone).
  double chaos_floor = -1;
  std::string chaos_basis;  // how chaos_floor was measured, for the printout
  CompareVerdict verdict = CompareVerdict::kOneSeed;
};

// `doc` is a train (or demo) report. Throws std::invalid_argument naming what is allowed when
// a variant or the metric is not in it, or when a seed lacks one of them; nlohmann::json::exception
// when the results are not shaped as train writes them.
RecipeComparison compare_recipes(const nlohmann::json& doc, const std::string& a, const std::string& b,
                                 const std::string& metric);

std::string format_comparison(const RecipeComparison& c);
// The loss chaos floor of one seed: |chaos_loss - loss| of a run's reference at its last logged
// step (the one-ulp-perturbed control is never evaluated on held-out data, so its training loss
// stands in for every loss metric); -1 when the reference has no such series.
double reference_loss_chaos(const nlohmann::json& reference);
// The comparison as JSON (report compare --json): a, b, metric, seeds, value_a, value_b, diff,
// mean, ci95 [lo, hi] (null with one seed), chaos_floor (null when the metric has none),
// chaos_basis, verdict (one-seed | seed-noise | chaos-floor | different) and verdict_text.
nlohmann::json comparison_json(const RecipeComparison& c);
// The verdict's name as comparison_json writes it.
const char* verdict_name(CompareVerdict v);

}  // namespace precsim

#include "precsim/sim/analysis/recipe_compare.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"

namespace precsim {
namespace {

using nlohmann::json;

const json& find_variant(const json& run, const std::string& name) {
  std::string names;
  for (const auto& v : run.at("variants")) {
    if (v.at("name") == name) return v;
    names += (names.empty() ? "" : ", ") + v.at("name").get<std::string>();
  }
  throw std::invalid_argument(fmt::format("no variant '{}' in the report; its variants: {}", name, names));
}

double metric_of(const json& variant, const std::string& metric) {
  const json& s = variant.at("summary");
  if (!s.contains(metric) || s[metric].is_null()) {
    std::string keys;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "diverged_at") keys += (keys.empty() ? "" : ", ") + it.key();
    throw std::invalid_argument(fmt::format("no metric '{}' in a variant's summary; allowed: {}", metric, keys));
  }
  return read_number(s.at(metric));
}

// at() throughout: the report comes from disk, and a missing key must throw (json::exception).

// The chaos floor of one seed in the metric's units, or -1 when the report has no counterpart.
// The perturbed reference is never evaluated on held-out data, so every loss metric is judged
// against its training-loss difference at the last logged step.
double chaos_of(const json& reference, const std::string& metric, std::string& basis) {
  if (metric == "weight_distance") {
    basis = "weight distance of the one-ulp-perturbed reference";
    return read_number(reference.at("chaos_floor"));
  }
  if (metric == "drift_over_chaos_floor") {
    basis = "1 by definition";
    return 1.0;
  }
  const bool loss = metric == "final_loss" || metric == "heldout_loss" || metric == "loss_gap" || metric == "heldout_loss_gap";
  if (!loss) return -1;
  const double chaos = reference_loss_chaos(reference);
  if (chaos >= 0) basis = "|training loss of the one-ulp-perturbed reference - reference's| at the last logged step";
  return chaos;
}

json json_numbers(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(json_number(x));
  return a;
}

const char* verdict_text(CompareVerdict v) {
  switch (v) {
    case CompareVerdict::kOneSeed: return "no verdict: one seed gives no interval (run train with --seeds 3 or more)";
    case CompareVerdict::kSeedNoise: return "indistinguishable from seed noise (the interval contains 0)";
    case CompareVerdict::kChaosFloor: return "indistinguishable from the chaos floor (|mean| within it)";
    case CompareVerdict::kDifferent: return "different";
  }
  return "";
}

}  // namespace

RecipeComparison compare_recipes(const json& doc, const std::string& a, const std::string& b, const std::string& metric) {
  const json& results = doc.at("results");
  if (!results.is_object() || !results.contains("runs") || !results.at("runs").is_array() || results.at("runs").empty())
    throw std::invalid_argument(fmt::format("a {} report holds no per-seed runs; compare reads train and demo reports",
                                            doc.at("kind").get<std::string>()));
  if (a == b) throw std::invalid_argument(fmt::format("--a and --b both name '{}'; name two variants", a));
  RecipeComparison c{a, b, metric, {}, {}, {}, {}, 0, 0, 0, -1, "", CompareVerdict::kOneSeed};
  double chaos_sum = 0;
  for (const auto& run : results.at("runs")) {
    c.seeds.push_back(run.at("seed").get<unsigned long long>());
    c.value_a.push_back(metric_of(find_variant(run, a), metric));
    c.value_b.push_back(metric_of(find_variant(run, b), metric));
    c.diff.push_back(c.value_b.back() - c.value_a.back());
    const double floor = chaos_of(run.at("reference"), metric, c.chaos_basis);
    chaos_sum = floor < 0 || chaos_sum < 0 ? -1 : chaos_sum + floor;
  }
  c.chaos_floor = chaos_sum < 0 ? -1 : chaos_sum / double(c.seeds.size());
  const MeanCi m = mean_ci95(c.diff);
  c.mean = m.mean;
  c.lo = m.lo;
  c.hi = m.hi;
  if (c.seeds.size() < 2) c.verdict = CompareVerdict::kOneSeed;
  else if (!(c.lo > 0 || c.hi < 0)) c.verdict = CompareVerdict::kSeedNoise;
  else if (c.chaos_floor >= 0 && std::fabs(c.mean) <= c.chaos_floor) c.verdict = CompareVerdict::kChaosFloor;
  else c.verdict = CompareVerdict::kDifferent;
  return c;
}

double reference_loss_chaos(const json& reference) {
  if (!reference.contains("series")) return -1;
  const json& series = reference.at("series");
  if (!series.contains("chaos_loss") || series.at("chaos_loss").empty()) return -1;
  return std::fabs(read_number(series.at("chaos_loss").back()) - read_number(series.at("loss").back()));
}

const char* verdict_name(CompareVerdict v) {
  switch (v) {
    case CompareVerdict::kOneSeed: return "one-seed";
    case CompareVerdict::kSeedNoise: return "seed-noise";
    case CompareVerdict::kChaosFloor: return "chaos-floor";
    case CompareVerdict::kDifferent: return "different";
  }
  return "";
}

json comparison_json(const RecipeComparison& c) {
  const bool interval = c.verdict != CompareVerdict::kOneSeed;
  return {{"a", c.a},
          {"b", c.b},
          {"metric", c.metric},
          {"seeds", c.seeds},
          {"value_a", json_numbers(c.value_a)},
          {"value_b", json_numbers(c.value_b)},
          {"diff", json_numbers(c.diff)},
          {"mean", json_number(c.mean)},
          {"ci95", interval ? json{json_number(c.lo), json_number(c.hi)} : json(nullptr)},
          {"chaos_floor", c.chaos_floor >= 0 ? json_number(c.chaos_floor) : json(nullptr)},
          {"chaos_basis", c.chaos_basis},
          {"verdict", verdict_name(c.verdict)},
          {"verdict_text", verdict_text(c.verdict)}};
}

std::string format_comparison(const RecipeComparison& c) {
  std::string out = fmt::format("{} of {} vs {}, paired by seed (difference = b - a)\n", c.metric, c.b, c.a);
  out += fmt::format("{:>8} {:>14} {:>14} {:>14}\n", "seed", "a", "b", "b - a");
  for (size_t i = 0; i < c.seeds.size(); ++i)
    out += fmt::format("{:>8} {:>14.6g} {:>14.6g} {:>+14.4g}\n", c.seeds[i], c.value_a[i], c.value_b[i], c.diff[i]);
  if (c.verdict == CompareVerdict::kOneSeed) out += fmt::format("difference {:+.4g} (1 seed: no interval)\n", c.mean);
  else
    out += fmt::format("mean difference {:+.4g}, 95% interval [{:+.4g}, {:+.4g}] over {} seeds\n", c.mean, c.lo, c.hi,
                       c.seeds.size());
  if (c.chaos_floor >= 0) out += fmt::format("chaos floor {:.4g} ({})\n", c.chaos_floor, c.chaos_basis);
  else out += fmt::format("chaos floor: none for {} (the verdict rests on seed noise)\n", c.metric);
  std::string v = verdict_text(c.verdict);
  if (c.verdict == CompareVerdict::kDifferent)
    v += fmt::format(": {} is {} than {} in {}", c.b, c.mean > 0 ? "higher" : "lower", c.a, c.metric);
  return out + "verdict: " + v + "\n";
}

}  // namespace precsim

#include "precsim/sim/experiment/train_findings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/recipe_compare.h"

namespace precsim {
namespace {

using nlohmann::json;

// Findings thresholds: below them a fraction is reported in the table but not called out.
constexpr double kStagnationNotable = 0.01;     // 1% of intended weight updates lost to rounding
constexpr double kWeightGradUnderflow = 0.001;  // 0.1% of the reference's non-zero weight gradients

SeedMean seed_mean(const json& v, const char* key) {
  SeedMean m{read_number(v.at("summary").at(key)), std::nullopt};
  if (v.contains("summary_ci95") && v.at("summary_ci95").contains(key)) {
    const json& iv = v.at("summary_ci95").at(key);
    m.ci95 = std::array<double, 2>{read_number(iv.at(0)), read_number(iv.at(1))};
  }
  return m;
}

VariantRow variant_row(const json& v) {
  const json& s = v.at("summary");
  auto num = [&](const char* k) { return s.contains(k) ? read_number(s.at(k)) : 0.0; };
  VariantRow r{v.at("name").get<std::string>(), seed_mean(v, "final_loss"), seed_mean(v, "heldout_loss"),
               seed_mean(v, "loss_gap")};
  r.heldout_accuracy = num("heldout_accuracy");
  r.local_grad_rel_err = num("local_grad_rel_err");
  r.drift_over_chaos_floor = num("drift_over_chaos_floor");
  r.underflow_fraction = num("underflow_fraction");
  r.stagnation_fraction = num("stagnation_fraction");
  r.weight_grad_underflow = num("local_weight_grad_underflow");
  r.skipped_steps = num("skipped_steps");
  const json& d = s.at("diverged_at");
  if (d.is_array()) {
    for (const auto& e : d) r.diverged_seeds += !e.is_null();
  } else if (!d.is_null()) {
    r.diverged_seeds = 1;
    r.diverged_at = d.get<long>();
  }
  return r;
}

std::string pct(double f) { return fmt::format("{:.3g}%", 100 * f); }

std::string interval(const SeedMean& m) {
  return m.ci95 ? fmt::format("{:+.3g} [{:.3g}, {:.3g}]", m.mean, (*m.ci95)[0], (*m.ci95)[1])
                : fmt::format("{:+.3g}", m.mean);
}

// Outside the seed noise (the interval excludes 0) and above the chaos floor.
bool gap_stands_out(const TrainSummary& s, const SeedMean& g) {
  if (!g.ci95) return false;
  const bool outside_noise = (*g.ci95)[0] > 0 || (*g.ci95)[1] < 0;
  return outside_noise && std::fabs(g.mean) > std::max(s.loss_chaos_floor, 0.0);
}

std::vector<const VariantRow*> by_gap(const TrainSummary& s) {
  std::vector<const VariantRow*> v;
  for (const auto& r : s.variants) v.push_back(&r);
  std::stable_sort(v.begin(), v.end(), [](const VariantRow* a, const VariantRow* b) {
    return std::fabs(a->loss_gap.mean) > std::fabs(b->loss_gap.mean);
  });
  return v;
}

std::string chaos_text(const TrainSummary& s) {
  return s.loss_chaos_floor >= 0 ? fmt::format("chaos floor {:.3g}", s.loss_chaos_floor)
                                 : "no chaos floor in the report";
}

std::vector<std::string> gap_findings(const TrainSummary& s) {
  const auto sorted = by_gap(s);
  if (s.seeds < 2) {
    std::string top;
    for (size_t i = 0; i < sorted.size() && i < 3; ++i)
      top += fmt::format("{}{} {:+.3g}", i ? ", " : "", sorted[i]->name, sorted[i]->loss_gap.mean);
    return {
        fmt::format("1 seed: no interval. Largest loss gaps to the reference: {} ({}); run --seeds 3 to tell them "
                    "from seed noise",
                    top, chaos_text(s))};
  }
  std::vector<std::string> out, in;
  for (const VariantRow* r : sorted)
    (gap_stands_out(s, r->loss_gap) ? out : in).push_back(fmt::format("{} {}", r->name, interval(r->loss_gap)));
  std::vector<std::string> f;
  if (!out.empty())
    f.push_back(fmt::format("loss gap outside the seed noise and the {} over {} seeds: {}", chaos_text(s), s.seeds,
                            fmt::join(out, ", ")));
  if (!in.empty())
    f.push_back(fmt::format("loss gap within the seed noise or the chaos floor: {}", fmt::join(in, ", ")));
  return f;
}

std::vector<std::string> variant_findings(const VariantRow& r) {
  std::vector<std::string> f;
  if (r.diverged_seeds > 0)
    f.push_back(r.diverged_at ? fmt::format("{} diverged at step {}", r.name, *r.diverged_at)
                              : fmt::format("{} diverged in {} seed(s)", r.name, r.diverged_seeds));
  if (r.underflow_fraction > 0)
    f.push_back(
        fmt::format("{} flushes {} of its gradient values to zero (underflow)", r.name, pct(r.underflow_fraction)));
  if (r.weight_grad_underflow >= kWeightGradUnderflow)
    f.push_back(fmt::format("{} computes {} of the weight gradients as zero where the reference's are not", r.name,
                            pct(r.weight_grad_underflow)));
  if (r.stagnation_fraction >= kStagnationNotable)
    f.push_back(fmt::format("{} stagnates: {} of its intended weight updates leave the stored weight unchanged", r.name,
                            pct(r.stagnation_fraction)));
  if (r.skipped_steps > 0)
    f.push_back(fmt::format("{} skipped {:.3g} steps on inf/NaN gradients (loss scaling)", r.name, r.skipped_steps));
  return f;
}

}  // namespace

TrainSummary train_summary_from_json(const json& results) {
  TrainSummary s;
  for (const auto& v : results.at("variants")) s.variants.push_back(variant_row(v));
  const json& runs = results.at("runs");
  s.seeds = std::max<int>(1, int(runs.size()));
  double chaos = 0;
  int with_series = 0;
  for (const auto& run : runs) {
    const json& ref = run.at("reference");
    s.ref_final_loss += read_number(ref.at("final_loss")) / s.seeds;
    s.ref_heldout_loss += read_number(ref.at("heldout_loss")) / s.seeds;
    s.ref_heldout_accuracy += read_number(ref.at("heldout_accuracy")) / s.seeds;
    if (ref.contains("evals") && ref.at("evals").contains("heldout_accuracy"))
      for (const auto& a : ref.at("evals").at("heldout_accuracy")) s.classification |= read_number(a) > 0;
    if (const double c = reference_loss_chaos(ref); c >= 0) {
      chaos += c;
      ++with_series;
    }
  }
  s.classification |= s.ref_heldout_accuracy > 0;
  if (with_series > 0) s.loss_chaos_floor = chaos / with_series;
  return s;
}

std::vector<std::string> train_findings(const TrainSummary& s) {
  std::vector<std::string> f;
  for (const auto& r : s.variants)
    for (auto& line : variant_findings(r)) f.push_back(std::move(line));
  for (auto& line : gap_findings(s)) f.push_back(std::move(line));
  return f;
}

}  // namespace precsim

#include "precsim/sim/experiment/attribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

struct NamedBits {
  const char* name;
  uint32_t bits;
};
constexpr NamedBits kRoleUnits[] = {{"weights", kPartWeights},
                                    {"activations", kPartActivations},
                                    {"activation_grads", kPartActivationGrads},
                                    {"weight_grads", kPartWeightGrads},
                                    {"optimizer_state", kPartOptimizerState},
                                    {"master_weights", kPartMasterWeights},
                                    {"grad_accumulation", kPartGradAccumulation},
                                    {"allreduce", kPartAllReduce}};
constexpr NamedBits kGemms[] = {{"forward", kPartForward}, {"dgrad", kPartDgrad}, {"wgrad", kPartWgrad}};

// The layer units of the model: MLP layers by index, the transformer's embedding, blocks and head.
std::vector<std::string> layer_parts(const TrainConfig& c) {
  std::vector<std::string> p;
  if (c.model_type == ModelKind::kTransformer) {
    p.push_back("embedding");
    for (int i = 0; i < c.transformer.layers; ++i) p.push_back(fmt::format("blocks.{}", i));
    p.push_back("head");
  } else {
    for (size_t i = 0; i <= c.model.hidden.size(); ++i) p.push_back(std::to_string(i));
  }
  return p;
}

std::string recipe_key(const Recipe& r) { return recipe_to_json(r).dump(); }

json effect_json(const MeanCi& m) { return {{"mean", json_number(m.mean)}, {"ci95", {json_number(m.lo), json_number(m.hi)}}}; }

// Inside the seed noise (the interval holds 0) or the chaos floor.
bool indistinguishable(const MeanCi& m, int seeds, double floor) {
  return (seeds > 1 && m.lo <= 0 && m.hi >= 0) || !(std::fabs(m.mean) > floor);
}

constexpr const char* kMetricNames[] = {"final_loss", "heldout_loss", "local_grad_rel_err"};

}  // namespace

std::vector<AttributionUnit> attribution_units(const TrainConfig& c, const std::string& kind,
                                               const std::vector<std::string>& only) {
  std::vector<AttributionUnit> all;
  if (kind == "role") {
    for (const auto& r : kRoleUnits) all.push_back({r.name, "", r.bits});
  } else if (kind == "gemm") {
    for (const auto& g : kGemms) all.push_back({g.name, "", g.bits});
  } else if (kind == "layer") {
    for (const auto& p : layer_parts(c)) all.push_back({p, p, kLayerParts});
  } else if (kind == "layer-role") {
    for (const auto& p : layer_parts(c))
      for (const auto& r : kRoleUnits)
        if (r.bits & kLayerParts) all.push_back({p + "/" + r.name, p, r.bits});
  } else {
    throw std::invalid_argument(fmt::format("--unit '{}' is unknown; allowed: role, gemm, layer, layer-role", kind));
  }
  if (only.empty()) return all;
  std::vector<AttributionUnit> out;
  for (const auto& name : only) {
    auto it = std::find_if(all.begin(), all.end(), [&](const AttributionUnit& u) { return u.name == name; });
    if (it == all.end()) {
      std::string valid;
      for (const auto& u : all) valid += (valid.empty() ? "" : ", ") + u.name;
      throw std::invalid_argument(fmt::format("--units: '{}' is not a {} unit of this model; valid: {}", name, kind, valid));
    }
    if (std::none_of(out.begin(), out.end(), [&](const AttributionUnit& u) { return u.name == name; })) out.push_back(*it);
  }
  return out;
}

Recipe high_recipe(const Recipe& r) {
  Recipe h = mix_recipe(r, recipe_preset("fp32"), kAllRoleParts);
  h.name = "high";
  return h;
}

Recipe with_unit(const Recipe& base, const Recipe& donor, const AttributionUnit& u) {
  if (u.part.empty()) return mix_recipe(base, donor, u.bits);
  Recipe r = base;
  r.parts.push_back(part_from_roles(u.part, donor, u.bits));
  return r;
}

CounterfactualRuns run_counterfactuals(const TrainConfig& c, const std::vector<Recipe>& recipes, const RunHooks& hooks) {
  TrainConfig cc = c;
  cc.variants.clear();
  std::map<std::string, int> index;
  std::vector<int> of(recipes.size());
  for (size_t i = 0; i < recipes.size(); ++i) {
    auto [it, fresh] = index.emplace(recipe_key(recipes[i]), int(cc.variants.size()));
    if (fresh) {
      cc.variants.push_back(recipes[i]);
      cc.variants.back().name = fmt::format("{}#{}", recipes[i].name, it->second);
    }
    of[i] = it->second;
  }
  const TrainResults results = run_training(cc, hooks);
  CounterfactualRuns out;
  out.distinct = int(cc.variants.size());
  out.metrics.assign(recipes.size(), {});
  out.summaries.assign(recipes.size(), {});
  for (const SeedResults& run : results.runs) {
    const ReferenceSeries& ref = run.reference.series;
    // As report compare's chaos floor for loss metrics: the last logged step.
    out.chaos_loss.push_back(std::fabs(ref.chaos_loss.back() - ref.loss.back()));
    out.reference_heldout.push_back(run.reference.heldout_loss);
    for (size_t i = 0; i < recipes.size(); ++i) {
      const VariantSummary& s = run.variants.at(size_t(of[i])).summary;
      out.summaries[i].push_back(s);
      out.metrics[i].push_back({s.final_loss, s.heldout_loss, s.local_grad_rel_err});
    }
  }
  return out;
}

namespace {

// The index of `metric` in kMetricNames, after the checks of the recipe that need no run.
size_t check_attribution(const Recipe& r, const std::string& metric) {
  const auto* named = std::find(std::begin(kMetricNames), std::end(kMetricNames), metric);
  if (named == std::end(kMetricNames))
    throw std::invalid_argument(fmt::format("--metric '{}' is unknown; allowed: heldout_loss, final_loss, local_grad_rel_err", metric));
  if (!r.parts.empty() || r.keep_bf16.any())
    throw std::invalid_argument(fmt::format(
        "recipe '{}' has per-part keys (layers, keep_bf16_layers); attribute a recipe without them (nvfp4 keeps its last layers in BF16; {{\"preset\": \"nvfp4\", \"keep_bf16_layers\": 0}} keeps none)", r.name));
  return size_t(named - std::begin(kMetricNames));
}

// The counterfactual recipes: 0 R, 1 H, then per unit leave-one-out and leave-one-in.
std::vector<Recipe> attribution_recipes(const Recipe& r, const Recipe& h, const std::vector<AttributionUnit>& units) {
  std::vector<Recipe> recipes = {r, h};
  for (const auto& u : units) {
    recipes.push_back(with_unit(r, h, u));
    recipes.back().name = "loo:" + u.name;
    recipes.push_back(with_unit(h, r, u));
    recipes.back().name = "loi:" + u.name;
  }
  return recipes;
}

using Effects = std::array<MeanCi, 3>;  // per metric of kMetricNames

// A unit's effects: leave-one-out (R - R with u from H) and leave-one-in (H with u from R - H).
struct UnitEffects {
  Effects loo, loi;
  bool indistinguishable = false;
};

// The statistics of an attribution: the gap R - H, each unit's effects and the interaction (sum
// of the leave-one-out effects - gap), all paired by seed; and the order of the units by their
// leave-one-out effect in the ranking metric.
struct AttributionStats {
  int seeds = 0;
  double chaos = 0, floor = 0;
  Effects gap, interaction;
  std::vector<UnitEffects> units;
  std::vector<size_t> order;
};

// Per seed, metric m of recipe a - recipe b.
std::vector<double> paired_diff(const CounterfactualRuns& runs, size_t a, size_t b, size_t m) {
  std::vector<double> d;
  for (size_t s = 0; s < runs.chaos_loss.size(); ++s) d.push_back(runs.metrics[a][s][m] - runs.metrics[b][s][m]);
  return d;
}

// Best first by the leave-one-out effect in metric mi; NaN last, ties in unit order.
std::vector<size_t> rank_units(const std::vector<UnitEffects>& units, size_t mi) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](size_t k) { return std::isnan(units[k].loo[mi].mean) ? -INFINITY : units[k].loo[mi].mean; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  return order;
}

AttributionStats attribution_stats(const CounterfactualRuns& runs, size_t n_units, size_t mi) {
  AttributionStats st;
  st.seeds = int(runs.chaos_loss.size());
  st.chaos = std::accumulate(runs.chaos_loss.begin(), runs.chaos_loss.end(), 0.0) / st.seeds;
  st.floor = mi < 2 ? st.chaos : 0.0;  // local error is measured at the reference's weights: no drift
  std::vector<std::vector<double>> loo_sum(3, std::vector<double>(runs.chaos_loss.size(), 0.0));
  for (size_t m = 0; m < 3; ++m) st.gap[m] = mean_ci95(paired_diff(runs, 0, 1, m));
  for (size_t k = 0; k < n_units; ++k) {
    const size_t loo = 2 + 2 * k, loi = loo + 1;
    UnitEffects u;
    for (size_t m = 0; m < 3; ++m) {
      const std::vector<double> e = paired_diff(runs, 0, loo, m);
      for (size_t s = 0; s < e.size(); ++s) loo_sum[m][s] += e[s];
      u.loo[m] = mean_ci95(e);
      u.loi[m] = mean_ci95(paired_diff(runs, loi, 1, m));
    }
    u.indistinguishable = indistinguishable(u.loo[mi], st.seeds, st.floor);
    st.units.push_back(u);
  }
  for (size_t m = 0; m < 3; ++m) {
    std::vector<double> d = paired_diff(runs, 0, 1, m);
    for (size_t s = 0; s < d.size(); ++s) d[s] = loo_sum[m][s] - d[s];
    st.interaction[m] = mean_ci95(d);
  }
  st.order = rank_units(st.units, mi);
  return st;
}

json effects_json(const Effects& e) {
  json j = json::object();
  for (size_t m = 0; m < 3; ++m) j[kMetricNames[m]] = effect_json(e[m]);
  return j;
}

// What an attribute report's results hold besides the statistics.
struct AttributionSetup {
  const Recipe &r, &h;
  const std::vector<AttributionUnit>& units;
  const std::string &kind, &metric;
  size_t mi;
};

json attribution_json(const AttributionSetup& a, const AttributionStats& st, const CounterfactualRuns& runs) {
  json ranked = json::array();
  for (size_t i = 0; i < st.order.size(); ++i) {
    const AttributionUnit& u = a.units[st.order[i]];
    const UnitEffects& e = st.units[st.order[i]];
    ranked.push_back({{"unit", u.name},
                      {"part", u.part.empty() ? json(nullptr) : json(u.part)},
                      {"identical", role_patch(a.r, u.bits, !u.part.empty()) == role_patch(a.h, u.bits, !u.part.empty())},
                      {"leave_one_out", effects_json(e.loo)},
                      {"leave_one_in", effects_json(e.loi)},
                      {"share_of_gap", json_number(e.loo[a.mi].mean / st.gap[a.mi].mean)},
                      {"indistinguishable", e.indistinguishable},
                      {"rank", i + 1}});
  }
  json ref_held = json::array();
  for (double v : runs.reference_heldout) ref_held.push_back(json_number(v));
  return {{"recipe", a.r.name},
          {"recipe_keys", recipe_to_json(a.r)},
          {"high_keys", recipe_to_json(a.h)},
          {"unit_kind", a.kind},
          {"metric", a.metric},
          {"seeds", st.seeds},
          {"runs_distinct", runs.distinct},
          {"gap", effects_json(st.gap)},
          {"chaos_floor_loss", json_number(st.chaos)},
          {"reference_heldout_loss", ref_held},
          {"interaction", effects_json(st.interaction)},
          {"units", ranked}};
}

}  // namespace

std::vector<Recipe> attribution_plan(const Recipe& r, const std::vector<AttributionUnit>& units,
                                     const std::string& metric) {
  check_attribution(r, metric);
  const Recipe h = high_recipe(r);
  if (recipe_keys_json(h) == recipe_keys_json(r))
    throw std::invalid_argument(fmt::format("recipe '{}' computes every role in FP32 (as the high-precision recipe): it has no loss gap to explain", r.name));
  return attribution_recipes(r, h, units);
}

json attribution_results(const Recipe& r, const std::vector<AttributionUnit>& units, const std::string& kind,
                         const std::string& metric, const CounterfactualRuns& runs) {
  const size_t mi = check_attribution(r, metric);
  const Recipe h = high_recipe(r);
  const AttributionStats st = attribution_stats(runs, units.size(), mi);
  const MeanCi& g = st.gap[mi];
  if (indistinguishable(g, st.seeds, st.floor))
    throw std::invalid_argument(fmt::format(
        "recipe '{}' has no loss gap to explain: its {} differs from the high-precision recipe's by {:.3g} "
        "(95% interval [{:.3g}, {:.3g}] over {} seed(s)), inside the seed noise or the chaos floor {:.3g}",
        r.name, metric, g.mean, g.lo, g.hi, st.seeds, st.floor));
  return attribution_json({r, h, units, kind, metric, mi}, st, runs);
}

json run_attribution(const TrainConfig& c, const Recipe& r, const std::vector<AttributionUnit>& units,
                     const std::string& kind, const std::string& metric, const RunHooks& hooks) {
  const CounterfactualRuns runs = run_counterfactuals(c, attribution_plan(r, units, metric), hooks);
  return attribution_results(r, units, kind, metric, runs);
}

constexpr const char* attribution_legend =
    "LOO: R with the unit from H, the part of the gap the unit causes; LOI: H with only the unit from R, what it\n"
    "costs alone; share: LOO / gap; flag: identical (R and H agree on the unit: run once, exactly 0),\n"
    "indistinguishable (LOO inside the seed noise or the chaos floor)\n";

std::string attribution_table(const json& results) {
  const std::string m = results["metric"].get<std::string>();
  const json& gap = results["gap"][m];
  const int seeds = results["seeds"].get<int>();
  // The loss chaos floor is in loss units; local error is measured at the reference's weights and
  // has none (the shadow step does not drift).
  const bool loss_metric = m == "heldout_loss" || m == "final_loss";
  const std::string floor = loss_metric ? fmt::format("chaos floor {:.3g}", read_number(results["chaos_floor_loss"]))
                                        : fmt::format("no chaos floor ({} is measured at the reference's weights)", m);
  const std::string interval =
      seeds > 1 ? fmt::format("[{:.3g}, {:.3g}]", read_number(gap["ci95"][0]), read_number(gap["ci95"][1])) : "(1 seed: no interval)";
  std::string t = fmt::format("attribution of recipe '{}' by {} over {} seed(s): {} gap {:.4g} {}, {}\n",
                              results["recipe"].get<std::string>(), results["unit_kind"].get<std::string>(), seeds, m,
                              read_number(gap["mean"]), interval, floor);
  t += fmt::format("{:>4} {:<26} {:>11} {:>23} {:>7} {:>11} {:>23}  {}\n", "rank", "unit", "LOO effect", "95% interval",
                   "share", "LOI effect", "95% interval", "flag");
  for (const json& u : results["units"]) {
    const json& lo = u["leave_one_out"][m];
    const json& li = u["leave_one_in"][m];
    t += fmt::format("{:>4} {:<26} {:>11.4g} [{:>10.3g},{:>10.3g}] {:>6.1f}% {:>11.4g} [{:>10.3g},{:>10.3g}]  {}\n",
                     u["rank"].get<int>(), u["unit"].get<std::string>(), read_number(lo["mean"]), read_number(lo["ci95"][0]),
                     read_number(lo["ci95"][1]), 100 * read_number(u["share_of_gap"]), read_number(li["mean"]),
                     read_number(li["ci95"][0]), read_number(li["ci95"][1]),
                     u["identical"].get<bool>() ? "identical" : u["indistinguishable"].get<bool>() ? "indistinguishable" : "");
  }
  const json& in = results["interaction"][m];
  t += fmt::format("interaction (sum of leave-one-out effects - gap): {:.4g} [{:.3g}, {:.3g}]\n", read_number(in["mean"]),
                   read_number(in["ci95"][0]), read_number(in["ci95"][1]));
  return t + attribution_legend;
}

}  // namespace precsim

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
constexpr NamedBits kRoles[] = {{"weights", kPartWeights},
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
  if (c.model_type == "transformer") {
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
    for (const auto& r : kRoles) all.push_back({r.name, "", r.bits});
  } else if (kind == "gemm") {
    for (const auto& g : kGemms) all.push_back({g.name, "", g.bits});
  } else if (kind == "layer") {
    for (const auto& p : layer_parts(c)) all.push_back({p, p, kLayerParts});
  } else if (kind == "layer-role") {
    for (const auto& p : layer_parts(c))
      for (const auto& r : kRoles)
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
  r.parts.push_back({u.part, role_patch(donor, u.bits, true).dump()});
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
  const json results = run_training(cc, hooks);
  CounterfactualRuns out;
  out.distinct = int(cc.variants.size());
  const json& runs = results.at("runs");
  out.metrics.assign(recipes.size(), {});
  out.summaries.assign(recipes.size(), json::array());
  for (const json& run : runs) {
    const json& ref = run.at("reference");
    const json& loss = ref.at("series").at("loss");
    const json& chaos = ref.at("series").at("chaos_loss");
    // As report compare's chaos floor for loss metrics: the last logged step.
    out.chaos_loss.push_back(std::fabs(read_number(chaos.back()) - read_number(loss.back())));
    out.reference_heldout.push_back(read_number(ref.at("heldout_loss")));
    for (size_t i = 0; i < recipes.size(); ++i) {
      const json& s = run.at("variants").at(size_t(of[i])).at("summary");
      out.summaries[i].push_back(s);
      out.metrics[i].push_back({read_number(s.at("final_loss")), read_number(s.at("heldout_loss")),
                                read_number(s.at("local_grad_rel_err"))});
    }
  }
  return out;
}

json run_attribution(const TrainConfig& c, const Recipe& r, const std::vector<AttributionUnit>& units,
                     const std::string& kind, const std::string& metric, const RunHooks& hooks) {
  const auto* named = std::find(std::begin(kMetricNames), std::end(kMetricNames), metric);
  if (named == std::end(kMetricNames))
    throw std::invalid_argument(fmt::format("--metric '{}' is unknown; allowed: heldout_loss, final_loss, local_grad_rel_err", metric));
  const size_t mi = size_t(named - std::begin(kMetricNames));
  if (!r.parts.empty() || r.keep_bf16.any())
    throw std::invalid_argument(fmt::format(
        "recipe '{}' has per-part keys (layers, keep_bf16_layers); attribute a recipe without them (nvfp4 keeps its last layers in BF16; {{\"preset\": \"nvfp4\", \"keep_bf16_layers\": 0}} keeps none)", r.name));
  const Recipe h = high_recipe(r);
  if (recipe_keys_json(h) == recipe_keys_json(r))
    throw std::invalid_argument(fmt::format("recipe '{}' computes every role in FP32 (as the high-precision recipe): it has no loss gap to explain", r.name));
  // Recipes: 0 R, 1 H, then per unit leave-one-out and leave-one-in.
  std::vector<Recipe> recipes = {r, h};
  for (const auto& u : units) {
    recipes.push_back(with_unit(r, h, u));
    recipes.back().name = "loo:" + u.name;
    recipes.push_back(with_unit(h, r, u));
    recipes.back().name = "loi:" + u.name;
  }
  const CounterfactualRuns runs = run_counterfactuals(c, recipes, hooks);
  const int seeds = int(runs.chaos_loss.size());
  const double chaos = std::accumulate(runs.chaos_loss.begin(), runs.chaos_loss.end(), 0.0) / seeds;
  const double floor = mi < 2 ? chaos : 0.0;  // local error is measured at the reference's weights: no drift
  auto diff = [&](size_t a, size_t b, int m) {
    std::vector<double> d;
    for (int s = 0; s < seeds; ++s) d.push_back(runs.metrics[a][size_t(s)][size_t(m)] - runs.metrics[b][size_t(s)][size_t(m)]);
    return d;
  };
  json gap = json::object();
  std::array<MeanCi, 3> gap_ci;
  for (int m = 0; m < 3; ++m) {
    gap_ci[size_t(m)] = mean_ci95(diff(0, 1, m));
    gap[kMetricNames[m]] = effect_json(gap_ci[size_t(m)]);
  }
  if (indistinguishable(gap_ci[mi], seeds, floor))
    throw std::invalid_argument(fmt::format(
        "recipe '{}' has no loss gap to explain: its {} differs from the high-precision recipe's by {:.3g} "
        "(95% interval [{:.3g}, {:.3g}] over {} seed(s)), inside the seed noise or the chaos floor {:.3g}",
        r.name, metric, gap_ci[mi].mean, gap_ci[mi].lo, gap_ci[mi].hi, seeds, floor));
  json rows = json::array();
  std::vector<std::vector<double>> loo_sum(3, std::vector<double>(size_t(seeds), 0.0));
  std::vector<double> rank_key;
  for (size_t k = 0; k < units.size(); ++k) {
    const size_t loo = 2 + 2 * k, loi = loo + 1;
    json lo = json::object(), li = json::object();
    MeanCi loo_held;
    for (int m = 0; m < 3; ++m) {
      const std::vector<double> e = diff(0, loo, m), f = diff(loi, 1, m);
      for (int s = 0; s < seeds; ++s) loo_sum[size_t(m)][size_t(s)] += e[size_t(s)];
      const MeanCi em = mean_ci95(e);
      if (size_t(m) == mi) loo_held = em;
      lo[kMetricNames[m]] = effect_json(em);
      li[kMetricNames[m]] = effect_json(mean_ci95(f));
    }
    const AttributionUnit& u = units[k];
    rows.push_back({{"unit", u.name},
                    {"part", u.part.empty() ? json(nullptr) : json(u.part)},
                    {"identical", role_patch(r, u.bits, !u.part.empty()) == role_patch(h, u.bits, !u.part.empty())},
                    {"leave_one_out", lo},
                    {"leave_one_in", li},
                    {"share_of_gap", json_number(loo_held.mean / gap_ci[mi].mean)},
                    {"indistinguishable", indistinguishable(loo_held, seeds, floor)}});
    rank_key.push_back(loo_held.mean);
  }
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double x = std::isnan(rank_key[a]) ? -INFINITY : rank_key[a], y = std::isnan(rank_key[b]) ? -INFINITY : rank_key[b];
    return x > y;
  });
  json ranked = json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    json row = rows[order[i]];
    row["rank"] = i + 1;
    ranked.push_back(row);
  }
  json interaction = json::object();
  for (int m = 0; m < 3; ++m) {
    std::vector<double> d(static_cast<size_t>(seeds));
    for (int s = 0; s < seeds; ++s) d[size_t(s)] = loo_sum[size_t(m)][size_t(s)] - (runs.metrics[0][size_t(s)][size_t(m)] - runs.metrics[1][size_t(s)][size_t(m)]);
    interaction[kMetricNames[m]] = effect_json(mean_ci95(d));
  }
  json ref_held = json::array();
  for (double v : runs.reference_heldout) ref_held.push_back(json_number(v));
  return {{"recipe", r.name},
          {"recipe_keys", recipe_to_json(r)},
          {"high_keys", recipe_to_json(h)},
          {"unit_kind", kind},
          {"metric", metric},
          {"seeds", seeds},
          {"runs_distinct", runs.distinct},
          {"gap", gap},
          {"chaos_floor_loss", json_number(chaos)},
          {"reference_heldout_loss", ref_held},
          {"interaction", interaction},
          {"units", ranked}};
}

std::string attribution_table(const json& results) {
  const std::string m = results["metric"].get<std::string>();
  const json& gap = results["gap"][m];
  std::string t = fmt::format("attribution of recipe '{}' by {} over {} seed(s): {} gap {:.4g} [{:.3g}, {:.3g}], chaos floor "
                              "(loss) {:.3g}\n",
                              results["recipe"].get<std::string>(), results["unit_kind"].get<std::string>(),
                              results["seeds"].get<int>(), m, read_number(gap["mean"]), read_number(gap["ci95"][0]),
                              read_number(gap["ci95"][1]), read_number(results["chaos_floor_loss"]));
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
  return t;
}

}  // namespace precsim

#include "precsim/sim/experiment/recipe_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include "mlp_problem.h"
#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/attribution.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/recipe_json.h"
#include "transformer_problem.h"

namespace precsim {
namespace {

using nlohmann::json;

// Formats of at most 8 bits take OCP MX block scaling (32 elements, an E8M0 scale each).
constexpr int kMxBlock = 32;
bool block_scaled(const Format& f) { return f.bits() <= 8; }

json operand(const std::string& name, bool mx) {
  return {{"format", name}, {"rounding", "nearest-even"}, {"scaling", mx ? "mx" : "none"}, {"block", mx ? kMxBlock : 0}};
}

using Assignment = std::vector<int>;  // per part, an index into the formats

std::string assignment_key(const Assignment& a) {
  std::string k;
  for (int i : a) k += char('0' + i);
  return k;
}

json effect_json(const MeanCi& m) { return {{"mean", json_number(m.mean)}, {"ci95", {json_number(m.lo), json_number(m.hi)}}}; }

}  // namespace

std::vector<SearchFormat> search_formats(const std::vector<std::string>& names) {
  std::vector<SearchFormat> out;
  for (const auto& n : names) {
    std::string err;
    const auto f = parse_format(n, &err);
    if (!f) throw std::invalid_argument("--formats: " + err);
    const double bits = f->bits() + (block_scaled(*f) ? 8.0 / kMxBlock : 0.0);
    if (std::any_of(out.begin(), out.end(), [&](const SearchFormat& s) { return s.name == n; }))
      throw std::invalid_argument(fmt::format("--formats: '{}' appears twice", n));
    out.push_back({n, bits});
  }
  if (out.size() < 2) throw std::invalid_argument("--formats: give at least two formats to choose between (e.g. e2m1,e4m3,bf16)");
  std::stable_sort(out.begin(), out.end(), [](const SearchFormat& a, const SearchFormat& b) { return a.bits > b.bits; });
  return out;
}

std::vector<std::pair<std::string, double>> search_parts(const TrainConfig& c) {
  std::vector<std::pair<std::string, double>> p;
  if (c.model_type == "transformer") {
    const TransformerLayout l = TransformerProblem(c, c.seed).layout;
    const double C = l.width, H = l.hidden, V = l.vocab;
    for (size_t i = 0; i < l.blocks.size(); ++i) p.push_back({fmt::format("blocks.{}", i), 4 * C * C + 2 * C * H});
    p.push_back({"head", V * C});
  } else {
    const MlpLayout l = MlpProblem(c, c.seed).layout;
    for (size_t i = 0; i < l.layers.size(); ++i) p.push_back({std::to_string(i), double(l.layers[i].in) * l.layers[i].out});
  }
  return p;
}

Recipe with_layer_format(const Recipe& base, const std::string& part, const SearchFormat& f) {
  std::string err;
  const bool mx = block_scaled(*parse_format(f.name, &err));  // search_formats checked the name
  const json op = operand(f.name, mx);
  const json patch = {{"gemm", {{"forward", {{"a", op}, {"b", op}}}, {"dgrad", {{"b", op}}}, {"wgrad", {{"b", op}}}}}};
  Recipe r = base;
  r.parts.push_back({part, patch.dump()});
  return r;
}

json run_search(const TrainConfig& c, const Recipe& base, const SearchOptions& o, const RunHooks& hooks) {
  if (!base.parts.empty() || base.keep_bf16.any())
    throw std::invalid_argument(fmt::format("recipe '{}' has per-part keys (layers, keep_bf16_layers); search from a recipe without them (nvfp4 keeps its last layers in BF16; {{\"preset\": \"nvfp4\", \"keep_bf16_layers\": 0}} keeps none)", base.name));
  const std::vector<SearchFormat> formats = search_formats(o.formats);
  const auto parts = search_parts(c);
  const double macs = std::accumulate(parts.begin(), parts.end(), 0.0, [](double s, const auto& p) { return s + p.second; });
  auto cost = [&](const Assignment& a) {
    double s = 0;
    for (size_t i = 0; i < parts.size(); ++i) s += parts[i].second * formats[size_t(a[i])].bits;
    return s / macs;
  };
  const int low = int(formats.size()) - 1;
  const Assignment cheapest(parts.size(), low);
  if (!(o.budget >= cost(cheapest) - 1e-12))
    throw std::invalid_argument(fmt::format(
        "--budget {} is below the cheapest assignment (every layer in {}: {:.4g} bits per weight and activation); "
        "allowed: {:.4g} or more",
        o.budget, formats.back().name, cost(cheapest), cost(cheapest)));
  auto recipe_of = [&](const Assignment& a, const std::string& name) {
    Recipe r = base;
    for (size_t i = 0; i < parts.size(); ++i) r = with_layer_format(r, parts[i].first, formats[size_t(a[i])]);
    r.name = name;
    return r;
  };
  // Every evaluated assignment: per seed its held-out and final loss, its summaries, its round.
  struct Point {
    Assignment a;
    std::vector<double> heldout, final_loss;
    json summaries;
    int round = 0;
  };
  std::vector<Point> points;
  std::map<std::string, size_t> seen;
  Assignment current(parts.size(), 0);
  std::vector<Assignment> path = {current};
  for (int round = 0;; ++round) {
    std::vector<Assignment> batch = {current};
    for (size_t i = 0; i < parts.size(); ++i)
      if (current[i] < low && cost(current) > o.budget) {
        Assignment next = current;
        ++next[i];
        batch.push_back(next);
      }
    if (round > 0 && batch.size() == 1) break;  // within the budget, or every part at the lowest format
    std::vector<Recipe> recipes;
    for (const auto& a : batch) recipes.push_back(recipe_of(a, "search"));
    const CounterfactualRuns runs = run_counterfactuals(c, recipes, hooks);
    for (size_t k = 0; k < batch.size(); ++k) {
      if (seen.count(assignment_key(batch[k]))) continue;
      Point p{batch[k], {}, {}, runs.summaries[k], round};
      for (const auto& m : runs.metrics[k]) {
        p.final_loss.push_back(m[0]);
        p.heldout.push_back(m[1]);
      }
      seen[assignment_key(batch[k])] = points.size();
      points.push_back(std::move(p));
    }
    if (batch.size() == 1) break;
    // Greedy: the candidate with the lowest mean held-out loss (ties: the cheaper, then part order).
    size_t best = 1;
    auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); };
    for (size_t k = 2; k < batch.size(); ++k) {
      const Point &pk = points[seen[assignment_key(batch[k])]], &pb = points[seen[assignment_key(batch[best])]];
      if (mean(pk.heldout) < mean(pb.heldout) || (mean(pk.heldout) == mean(pb.heldout) && cost(batch[k]) < cost(batch[best])))
        best = k;
    }
    current = batch[best];
    path.push_back(current);
  }
  // Loss changes against the all-highest assignment, paired by seed; the Pareto set; the chosen point.
  const Point& top = points[0];
  json out_points = json::array();
  auto mean_of = [](const std::vector<double>& v) { return mean_ci95(v).mean; };
  for (size_t k = 0; k < points.size(); ++k) {
    const Point& p = points[k];
    bool dominated = false;
    for (const Point& q : points)
      if (&q != &p && cost(q.a) <= cost(p.a) && mean_of(q.heldout) <= mean_of(p.heldout) &&
          (cost(q.a) < cost(p.a) || mean_of(q.heldout) < mean_of(p.heldout)))
        dominated = true;
    std::vector<double> dh(p.heldout.size()), df(p.heldout.size());
    for (size_t s = 0; s < dh.size(); ++s) {
      dh[s] = p.heldout[s] - top.heldout[s];
      df[s] = p.final_loss[s] - top.final_loss[s];
    }
    json assign = json::object();
    for (size_t i = 0; i < parts.size(); ++i) assign[parts[i].first] = formats[size_t(p.a[i])].name;
    const std::string name = fmt::format("search-{}", assignment_key(p.a));
    json snippet = recipe_to_json(recipe_of(p.a, name));
    snippet["name"] = name;
    out_points.push_back({{"assignment", assign},
                          {"cost_bits", json_number(cost(p.a))},
                          {"heldout_loss", effect_json(mean_ci95(p.heldout))},
                          {"heldout_loss_change", effect_json(mean_ci95(dh))},
                          {"final_loss_change", effect_json(mean_ci95(df))},
                          {"round", p.round},
                          {"on_path", std::find(path.begin(), path.end(), p.a) != path.end()},
                          {"pareto", !dominated},
                          {"recipe", snippet},
                          {"digest", results_digest(p.summaries)}});
  }
  // The chosen point: the lowest mean held-out loss within the budget.
  int chosen = -1;
  for (size_t k = 0; k < points.size(); ++k)
    if (cost(points[k].a) <= o.budget + 1e-12 &&
        (chosen < 0 || mean_of(points[k].heldout) < mean_of(points[size_t(chosen)].heldout)))
      chosen = int(k);
  json fmts = json::array(), prts = json::array();
  for (const auto& f : formats) fmts.push_back({{"format", f.name}, {"bits", json_number(f.bits)}});
  for (const auto& p : parts) prts.push_back({{"part", p.first}, {"macs_per_row", json_number(p.second)}});
  return {{"base", base.name},
          {"method", "greedy"},
          {"budget_bits", json_number(o.budget)},
          {"formats", fmts},
          {"parts", prts},
          {"seeds", int(top.heldout.size())},
          {"points", out_points},
          {"chosen", chosen < 0 ? json(nullptr) : json(chosen)}};
}

std::string search_table(const json& results) {
  std::string t = fmt::format("search from '{}' ({}), budget {:.4g} bits, {} seed(s): the Pareto set (loss change against "
                              "every layer in {})\n",
                              results["base"].get<std::string>(), results["method"].get<std::string>(),
                              read_number(results["budget_bits"]), results["seeds"].get<int>(),
                              results["formats"][0]["format"].get<std::string>());
  const json& pts = results["points"];
  for (size_t k = 0; k < pts.size(); ++k) {
    const json& p = pts[k];
    if (!p["pareto"].get<bool>()) continue;
    std::string assign;
    for (const auto& [part, f] : p["assignment"].items()) assign += (assign.empty() ? "" : " ") + part + "=" + f.get<std::string>();
    const json& d = p["heldout_loss_change"];
    t += fmt::format("{} {:>7.4g} bits  held-out change {:>10.4g} [{:.3g}, {:.3g}]  {}\n",
                     results["chosen"] == json(k) ? "*" : " ", read_number(p["cost_bits"]), read_number(d["mean"]),
                     read_number(d["ci95"][0]), read_number(d["ci95"][1]), assign);
    t += "    recipe: " + p["recipe"].dump() + "\n    digest: " + p["digest"].get<std::string>() + "\n";
  }
  return t;
}

}  // namespace precsim

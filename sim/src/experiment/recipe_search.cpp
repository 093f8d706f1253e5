#include "precsim/sim/experiment/recipe_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/attribution.h"
#include "precsim/sim/experiment/problem_shape.h"
#include "precsim/sim/train/part_keys.h"
#include "precsim/sim/train/recipe_parts.h"
#include "precsim/sim/train/recipe_json.h"

namespace precsim {
namespace {

using nlohmann::json;

// Formats of at most 8 bits take OCP MX block scaling (32 elements, an E8M0 scale each).
constexpr int kMxBlock = 32;
bool block_scaled(const Format& f) { return f.bits() <= 8; }

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
  if (c.model_type == ModelKind::kTransformer) {
    const TransformerLayout l = transformer_shape(c).layout;
    const double C = l.width, H = l.hidden, V = l.vocab;
    for (size_t i = 0; i < l.blocks.size(); ++i) p.push_back({fmt::format("blocks.{}", i), 4 * C * C + 2 * C * H});
    p.push_back({"head", V * C});
  } else {
    const MlpLayout l = mlp_shape(c).layout;
    for (size_t i = 0; i < l.layers.size(); ++i) p.push_back({std::to_string(i), double(l.layers[i].in) * l.layers[i].out});
  }
  return p;
}

Recipe with_layer_format(const Recipe& base, const std::string& part, const SearchFormat& f) {
  std::string err;
  const Format fmt = *parse_format(f.name, &err);  // search_formats checked the name
  const bool mx = block_scaled(fmt);
  const OperandSpec op{TensorFormat{f.name, Rounding::kNearestEven, fmt}, mx ? Scaling::kMx : Scaling::kNone,
                       mx ? kMxBlock : 0};
  auto values = std::make_shared<Recipe>(base);
  values->parts.clear();
  values->forward.a = values->forward.b = values->dgrad.b = values->wgrad.b = op;
  Recipe r = base;
  r.parts.push_back({part, std::nullopt,
                     part_keys_at({"gemm.forward.a", "gemm.forward.b", "gemm.dgrad.b", "gemm.wgrad.b"}),
                     std::move(values)});
  return r;
}

namespace {

// The search's choices: per part a format, its cost in bits (MAC-weighted mean over the parts),
// and the recipe of an assignment.
struct SearchSpace {
  const Recipe& base;
  std::vector<SearchFormat> formats;
  std::vector<std::pair<std::string, double>> parts;
  double macs = 0;

  double cost(const Assignment& a) const {
    double s = 0;
    for (size_t i = 0; i < parts.size(); ++i) s += parts[i].second * formats[size_t(a[i])].bits;
    return s / macs;
  }
  Recipe recipe(const Assignment& a, const std::string& name) const {
    Recipe r = base;
    for (size_t i = 0; i < parts.size(); ++i) r = with_layer_format(r, parts[i].first, formats[size_t(a[i])]);
    r.name = name;
    return r;
  }
  int lowest() const { return int(formats.size()) - 1; }
};

SearchSpace search_space(const TrainConfig& c, const Recipe& base, const SearchOptions& o) {
  if (!base.parts.empty() || base.keep_bf16.any())
    throw std::invalid_argument(fmt::format("recipe '{}' has per-part keys (layers, keep_bf16_layers); search from a recipe without them (nvfp4 keeps its last layers in BF16; {{\"preset\": \"nvfp4\", \"keep_bf16_layers\": 0}} keeps none)", base.name));
  SearchSpace sp{base, search_formats(o.formats), search_parts(c), 0.0};
  sp.macs = std::accumulate(sp.parts.begin(), sp.parts.end(), 0.0, [](double s, const auto& p) { return s + p.second; });
  const double cheapest = sp.cost(Assignment(sp.parts.size(), sp.lowest()));
  if (!(o.budget >= cheapest - 1e-12))
    throw std::invalid_argument(fmt::format(
        "--budget {} is below the cheapest assignment (every layer in {}: {:.4g} bits per weight and activation); "
        "allowed: {:.4g} or more",
        o.budget, sp.formats.back().name, cheapest, cheapest));
  return sp;
}

// An evaluated assignment: per seed its held-out and final loss and its summary, and its round.
struct Point {
  Assignment a;
  std::vector<double> heldout, final_loss;
  std::vector<VariantSummary> summaries;
  int round = 0;
};

// Every evaluated assignment (the all-highest first) and the greedy path through them.
struct SearchTrace {
  std::vector<Point> points;
  std::vector<Assignment> path;
};

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

// The round's candidates: the current assignment, then each part one format lower while over budget.
std::vector<Assignment> candidates(const SearchSpace& sp, const Assignment& current, double budget) {
  std::vector<Assignment> batch = {current};
  for (size_t i = 0; i < sp.parts.size(); ++i)
    if (current[i] < sp.lowest() && sp.cost(current) > budget) {
      Assignment next = current;
      ++next[i];
      batch.push_back(next);
    }
  return batch;
}

// Greedy from the all-highest assignment: each round runs the candidates in one lockstep run and
// moves to the one with the lowest mean held-out loss (ties: the cheaper, then part order).
SearchTrace greedy_search(const TrainConfig& c, const SearchSpace& sp, double budget, const RunHooks& hooks) {
  SearchTrace t;
  std::map<std::string, size_t> seen;
  Assignment current(sp.parts.size(), 0);
  t.path = {current};
  for (int round = 0;; ++round) {
    const std::vector<Assignment> batch = candidates(sp, current, budget);
    if (round > 0 && batch.size() == 1) break;  // within the budget, or every part at the lowest format
    std::vector<Recipe> recipes;
    for (const auto& a : batch) recipes.push_back(sp.recipe(a, "search"));
    const CounterfactualRuns runs = run_counterfactuals(c, recipes, hooks);
    for (size_t k = 0; k < batch.size(); ++k) {
      if (seen.count(assignment_key(batch[k]))) continue;
      Point p{batch[k], {}, {}, runs.summaries[k], round};
      for (const auto& m : runs.metrics[k]) {
        p.final_loss.push_back(m[0]);
        p.heldout.push_back(m[1]);
      }
      seen[assignment_key(batch[k])] = t.points.size();
      t.points.push_back(std::move(p));
    }
    if (batch.size() == 1) break;
    size_t best = 1;
    for (size_t k = 2; k < batch.size(); ++k) {
      const Point &pk = t.points[seen[assignment_key(batch[k])]], &pb = t.points[seen[assignment_key(batch[best])]];
      if (mean(pk.heldout) < mean(pb.heldout) ||
          (mean(pk.heldout) == mean(pb.heldout) && sp.cost(batch[k]) < sp.cost(batch[best])))
        best = k;
    }
    current = batch[best];
    t.path.push_back(current);
  }
  return t;
}

// A point's statistics: loss changes against the all-highest assignment, paired by seed.
struct PointStats {
  double cost = 0;
  MeanCi heldout, heldout_change, final_change;
  bool on_path = false, pareto = false;
};

struct SearchStats {
  std::vector<PointStats> points;
  std::optional<size_t> chosen;  // the lowest mean held-out loss within the budget
};

// Dominated: another point costs no more and loses no more held-out loss, and one of them less.
bool dominated(const SearchSpace& sp, const SearchTrace& t, const Point& p) {
  auto mean_of = [](const std::vector<double>& v) { return mean_ci95(v).mean; };
  for (const Point& q : t.points)
    if (&q != &p && sp.cost(q.a) <= sp.cost(p.a) && mean_of(q.heldout) <= mean_of(p.heldout) &&
        (sp.cost(q.a) < sp.cost(p.a) || mean_of(q.heldout) < mean_of(p.heldout)))
      return true;
  return false;
}

SearchStats search_stats(const SearchSpace& sp, const SearchTrace& t, double budget) {
  const Point& top = t.points[0];
  SearchStats st;
  for (const Point& p : t.points) {
    PointStats ps;
    ps.cost = sp.cost(p.a);
    std::vector<double> dh(p.heldout.size()), df(p.heldout.size());
    for (size_t s = 0; s < dh.size(); ++s) {
      dh[s] = p.heldout[s] - top.heldout[s];
      df[s] = p.final_loss[s] - top.final_loss[s];
    }
    ps.heldout = mean_ci95(p.heldout);
    ps.heldout_change = mean_ci95(dh);
    ps.final_change = mean_ci95(df);
    ps.on_path = std::find(t.path.begin(), t.path.end(), p.a) != t.path.end();
    ps.pareto = !dominated(sp, t, p);
    st.points.push_back(ps);
  }
  for (size_t k = 0; k < st.points.size(); ++k)
    if (st.points[k].cost <= budget + 1e-12 && (!st.chosen || st.points[k].heldout.mean < st.points[*st.chosen].heldout.mean))
      st.chosen = k;
  return st;
}

// A point of a search report: its assignment, statistics, recipe and the digest of its summaries.
json point_json(const SearchSpace& sp, const Point& p, const PointStats& ps) {
  json assign = json::object();
  for (size_t i = 0; i < sp.parts.size(); ++i) assign[sp.parts[i].first] = sp.formats[size_t(p.a[i])].name;
  const std::string name = fmt::format("search-{}", assignment_key(p.a));
  json snippet = recipe_to_json(sp.recipe(p.a, name));
  snippet["name"] = name;
  json summaries = json::array();
  for (const VariantSummary& s : p.summaries) summaries.push_back(variant_summary_json(s));
  return {{"assignment", assign},
          {"cost_bits", json_number(ps.cost)},
          {"heldout_loss", effect_json(ps.heldout)},
          {"heldout_loss_change", effect_json(ps.heldout_change)},
          {"final_loss_change", effect_json(ps.final_change)},
          {"round", p.round},
          {"on_path", ps.on_path},
          {"pareto", ps.pareto},
          {"recipe", snippet},
          {"digest", results_digest(summaries)}};
}

json search_json(const SearchSpace& sp, const SearchTrace& t, const SearchStats& st, double budget) {
  json points = json::array(), fmts = json::array(), prts = json::array();
  for (size_t k = 0; k < t.points.size(); ++k) points.push_back(point_json(sp, t.points[k], st.points[k]));
  for (const auto& f : sp.formats) fmts.push_back({{"format", f.name}, {"bits", json_number(f.bits)}});
  for (const auto& p : sp.parts) prts.push_back({{"part", p.first}, {"macs_per_row", json_number(p.second)}});
  return {{"base", sp.base.name},
          {"method", "greedy"},
          {"budget_bits", json_number(budget)},
          {"formats", fmts},
          {"parts", prts},
          {"seeds", int(t.points[0].heldout.size())},
          {"points", points},
          {"chosen", st.chosen ? json(*st.chosen) : json(nullptr)}};
}

}  // namespace

json run_search(const TrainConfig& c, const Recipe& base, const SearchOptions& o, const RunHooks& hooks) {
  const SearchSpace sp = search_space(c, base, o);
  const SearchTrace t = greedy_search(c, sp, o.budget, hooks);
  return search_json(sp, t, search_stats(sp, t, o.budget), o.budget);
}

namespace {

// The Pareto points, cheapest first (the greedy path visits them from the costliest down).
std::vector<size_t> pareto_by_cost(const json& pts) {
  std::vector<size_t> order;
  for (size_t k = 0; k < pts.size(); ++k)
    if (pts[k]["pareto"].get<bool>()) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return read_number(pts[a]["cost_bits"]) < read_number(pts[b]["cost_bits"]);
  });
  return order;
}

std::string search_row(const json& p, bool chosen, bool one_seed) {
  std::string assign;
  for (const auto& [part, f] : p["assignment"].items()) assign += (assign.empty() ? "" : " ") + part + "=" + f.get<std::string>();
  const json& d = p["heldout_loss_change"];
  const double lo = read_number(d["ci95"][0]), hi = read_number(d["ci95"][1]);
  const std::string interval = one_seed ? "no interval" : fmt::format("[{:+.3e}, {:+.3e}]", lo, hi);
  const bool noise = !one_seed && lo <= 0 && hi >= 0;
  return fmt::format("{} {:>7.4g} {:>+12.4e}  {:<26} {:<5}  {}\n", chosen ? "*" : " ", read_number(p["cost_bits"]),
                     read_number(d["mean"]), interval, noise ? "noise" : "", assign);
}

}  // namespace

std::vector<json> pareto_recipes(const json& results) {
  std::vector<json> out;
  for (size_t k : pareto_by_cost(results["points"])) out.push_back(results["points"][k]["recipe"]);
  return out;
}

std::string search_table(const json& results) {
  const int seeds = results["seeds"].get<int>();
  const std::string top = results["formats"][0]["format"].get<std::string>();
  std::string t = fmt::format("search from '{}' ({}), budget {:.4g} bits, {} seed(s): the Pareto set, cheapest first\n",
                              results["base"].get<std::string>(), results["method"].get<std::string>(),
                              read_number(results["budget_bits"]), seeds);
  t += fmt::format("{} {:>7} {:>12}  {:<26} {:<5}  {}\n", " ", "bits", "held-out", "95% interval", "noise", "assignment");
  const json& pts = results["points"];
  const std::vector<size_t> order = pareto_by_cost(pts);
  for (size_t k : order) t += search_row(pts[k], results["chosen"] == json(k), seeds < 2);
  t += "legend:\n";
  t += "  bits          per weight and activation (scales included), averaged over the layers by multiply-adds\n";
  t += fmt::format("  held-out      change of the held-out loss against every layer in {}, mean over seeds\n", top);
  t += "  95% interval  of that mean (Student's t over the seeds)\n";
  t += "  noise         the interval holds 0: these seeds do not tell the point from the top one\n";
  t += "  *             the point chosen: the lowest held-out loss within the budget\n";
  t += "findings:\n";
  t += fmt::format("  - {} Pareto point(s) of {} tried{}\n", order.size(), pts.size(),
                   seeds < 2 ? "; 1 seed: no interval, run --seeds 3 to tell the points from seed noise" : "");
  t += "  - each point's recipe and digest are in the report (results.points[k]); --save-recipes FILE writes them as a "
       "config that precsim train --config runs\n";
  return t;
}

}  // namespace precsim

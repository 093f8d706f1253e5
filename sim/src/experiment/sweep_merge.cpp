#include "precsim/sim/experiment/sweep_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/sweep_unit.h"

namespace precsim {
namespace {

using nlohmann::json;

constexpr const char* kMetrics[] = {"final_loss", "heldout_loss", "heldout_accuracy"};

// Element bits of the tensor classes of the precision scaling law: the narrower of a tensor's
// stored format and the forward product's operand format (Y = X W^T: a is X, b is W), and the
// gradients flowing backwards.
json recipe_bits(const Recipe& r) {
  return {{"weights", std::min(r.weights.format.bits(), r.forward.b.fmt.format.bits())},
          {"activations", std::min(r.activations.format.bits(), r.forward.a.fmt.format.bits())},
          {"gradients", r.activation_grads.format.bits()}};
}

// The FP64 reference's metrics, averaged over the unit's seeds in run order.
json reference_summary(const json& results) {
  json s = json::object();
  for (const char* k : kMetrics) {
    double sum = 0;
    for (const auto& run : results["runs"]) sum += read_number(run["reference"][k]);
    s[k] = json_number(sum / double(results["runs"].size()));
  }
  s["diverged_at"] = nullptr;
  return s;
}

json unit_rows(const SweepUnit& u, const json& doc) {
  const TrainConfig c = train_config_from_json(u.config);
  const json& res = doc["results"];
  json base = {{"unit", u.id}, {"index", u.index}, {"point", u.point}, {"seed", c.seed}, {"parameters", res["parameters"]}};
  json rows = json::array();
  auto add = [&](const std::string& name, const json& bits, const json& summary) {
    json row = base;
    row["variant"] = name;
    row["bits"] = bits;
    for (const char* k : kMetrics) row[k] = summary[k];
    // Over a unit's seeds diverged_at is one entry per seed ([null, null]: none diverged).
    const json& at = summary["diverged_at"];
    row["diverged"] = at.is_array() ? std::any_of(at.begin(), at.end(), [](const json& e) { return !e.is_null(); })
                                    : !at.is_null();
    rows.push_back(row);
  };
  add("reference", {{"weights", 64}, {"activations", 64}, {"gradients", 64}}, reference_summary(res));
  for (size_t v = 0; v < c.variants.size(); ++v) add(c.variants[v].name, recipe_bits(c.variants[v]), res["variants"][v]["summary"]);
  return rows;
}

// Rows of the same point (every axis but the seed) and variant, in plan order.
json aggregate_points(const json& rows) {
  std::map<std::string, size_t> slot;
  std::vector<std::vector<const json*>> groups;
  for (const auto& row : rows) {
    json point = row["point"];
    point.erase("seed");
    const std::string key = point.dump() + "|" + row["variant"].get<std::string>();
    const auto [it, fresh] = slot.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&row);
  }
  json points = json::array();
  for (const auto& g : groups) {
    json p = {{"point", (*g[0])["point"]}, {"variant", (*g[0])["variant"]}, {"bits", (*g[0])["bits"]},
              {"parameters", (*g[0])["parameters"]}, {"units", g.size()}};
    p["point"].erase("seed");
    json seeds = json::array();
    int diverged = 0;
    for (const json* r : g) seeds.push_back((*r)["seed"]), diverged += (*r)["diverged"].get<bool>();
    p["seeds"] = seeds;
    p["diverged"] = diverged;
    for (const char* k : kMetrics) {
      std::vector<double> xs;
      for (const json* r : g) xs.push_back(read_number((*r)[k]));
      const MeanCi m = mean_ci95(xs);
      p[k] = {{"mean", json_number(m.mean)}, {"lo", json_number(m.lo)}, {"hi", json_number(m.hi)}};
    }
    points.push_back(p);
  }
  return points;
}

}  // namespace

std::vector<size_t> unfinished_units(const SweepPlan& plan, const std::filesystem::path& out_dir) {
  std::vector<size_t> todo;
  for (const SweepUnit& u : plan.units)
    if (read_finished_unit(unit_report_path(out_dir, u), u).is_null()) todo.push_back(u.index);
  return todo;
}

SweepMerge merge_sweep(const SweepPlan& plan, const std::filesystem::path& out_dir) {
  SweepMerge m;
  json rows = json::array(), digests = json::array();
  for (const SweepUnit& u : plan.units) {
    const json doc = read_finished_unit(unit_report_path(out_dir, u), u);
    if (doc.is_null()) {
      m.missing.push_back(u.id);
      continue;
    }
    for (auto& row : unit_rows(u, doc)) rows.push_back(std::move(row));
    digests.push_back({{"unit", u.id}, {"digest", doc["digest"]}});
  }
  m.results = {{"axes", plan.paths},
               {"units_planned", plan.units.size()},
               {"units_finished", plan.units.size() - m.missing.size()},
               {"missing", m.missing},
               {"unit_digests", digests},
               {"rows", rows},
               {"points", aggregate_points(rows)}};
  return m;
}

json sweep_report_config(const SweepPlan& plan) {
  return {{"sweep", plan.spec}, {"base", plan.base}, {"axes", plan.paths}, {"units", plan.units.size()}};
}

namespace {

// {"model.hidden":[8],"lr":0.1} as model.hidden=[8] lr=0.1: the axes as the plan names them.
std::string point_text(const json& point) {
  std::string s;
  for (const auto& [k, v] : point.items()) s += (s.empty() ? "" : " ") + k + "=" + v.dump();
  return s.empty() ? "(base)" : s;
}

// "mean [lo, hi]", or the mean alone where one seed gives no interval.
std::string mean_interval(const json& m, size_t seeds) {
  if (seeds < 2) return fmt::format("{:.4g}", read_number(m["mean"]));
  return fmt::format("{:.4g} [{:.4g}, {:.4g}]", read_number(m["mean"]), read_number(m["lo"]), read_number(m["hi"]));
}

// Per variant, its held-out loss minus the reference's at the same point, lowest and highest
// over the points: what the sweep found, in the reference's units.
std::vector<std::string> sweep_findings(const json& points) {
  std::map<std::string, double> reference;
  for (const auto& p : points)
    if (p["variant"] == "reference") reference[p["point"].dump()] = read_number(p["heldout_loss"]["mean"]);
  struct Range {
    double lo = INFINITY, hi = -INFINITY;
    std::string at_lo, at_hi;
  };
  std::map<std::string, Range> gaps;
  std::vector<std::string> order;
  for (const auto& p : points) {
    const std::string v = p["variant"].get<std::string>();
    const auto ref = reference.find(p["point"].dump());
    if (v == "reference" || ref == reference.end()) continue;
    if (!gaps.count(v)) order.push_back(v);
    Range& r = gaps[v];
    const double gap = read_number(p["heldout_loss"]["mean"]) - ref->second;
    if (gap < r.lo) r.lo = gap, r.at_lo = point_text(p["point"]);
    if (gap > r.hi) r.hi = gap, r.at_hi = point_text(p["point"]);
  }
  std::vector<std::string> out;
  for (const std::string& v : order) {
    const Range& r = gaps[v];
    out.push_back(r.at_lo == r.at_hi ? fmt::format("{}: held-out loss {:+.4g} against the reference", v, r.lo)
                                     : fmt::format("{}: held-out loss {:+.4g} ({}) to {:+.4g} ({}) against the reference",
                                                   v, r.lo, r.at_lo, r.hi, r.at_hi));
  }
  return out;
}

}  // namespace

std::string sweep_points_table(const json& results) {
  const json& points = results["points"];
  size_t width = 5, max_seeds = 0, diverged = 0;
  for (const auto& p : points) {
    width = std::max(width, std::min<size_t>(40, point_text(p["point"]).size()));
    max_seeds = std::max(max_seeds, p["units"].get<size_t>());
    diverged += p.value("diverged", 0);
  }
  const char* head = max_seeds < 2 ? "" : " [95%]";
  std::string t = fmt::format("{:<{}} {:<14} {:>5} {:>24} {:>24}\n", "point", width, "variant", "seeds",
                              std::string("final loss") + head, std::string("heldout loss") + head);
  for (const auto& p : points) {
    std::string point = point_text(p["point"]);
    if (point.size() > width) point = point.substr(0, width - 3) + "...";
    const size_t seeds = p["units"].get<size_t>();
    t += fmt::format("{:<{}} {:<14} {:>5} {:>24} {:>24}\n", point, width, p["variant"].get<std::string>(), seeds,
                     mean_interval(p["final_loss"], seeds), mean_interval(p["heldout_loss"], seeds));
  }
  t += "legend:\n  point         the plan's axes at this point (seed excepted)\n"
       "  seeds         finished units averaged at the point (one per value of the plan's seed axis)\n"
       "  final loss    training loss after the last step, mean over the seeds\n"
       "  heldout loss  loss on the held-out set, mean over the seeds; reference: the FP64 run\n";
  if (max_seeds >= 2) t += "  [95%]         the 95% interval of the mean (Student's t over the seeds)\n";
  t += "findings:\n";
  if (max_seeds < 2) t += "  - 1 seed per point: no interval; give the plan's seeds axis 3 or more values\n";
  for (const std::string& f : sweep_findings(points)) t += "  - " + f + "\n";
  if (diverged) t += fmt::format("  - {} (point, variant, seed) runs diverged\n", diverged);
  const size_t missing = results.value("missing", json::array()).size();
  if (missing) t += fmt::format("  - {} planned units not finished: run the sweep again to resume\n", missing);
  return t;
}

}  // namespace precsim

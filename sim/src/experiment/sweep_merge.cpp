#include "precsim/sim/experiment/sweep_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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
    row["diverged"] = !summary["diverged_at"].is_null();
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

std::string sweep_points_table(const json& results) {
  std::string t = fmt::format("{:<40} {:<14} {:>5} {:>24} {:>24}\n", "point", "variant", "seeds", "final loss [95%]",
                              "heldout loss [95%]");
  auto ci = [](const json& m) {
    return fmt::format("{:.4g} [{:.4g}, {:.4g}]", read_number(m["mean"]), read_number(m["lo"]), read_number(m["hi"]));
  };
  for (const auto& p : results["points"]) {
    std::string point = p["point"].dump();
    if (point.size() > 40) point = point.substr(0, 37) + "...";
    t += fmt::format("{:<40} {:<14} {:>5} {:>24} {:>24}\n", point, p["variant"].get<std::string>(), p["units"].get<size_t>(),
                     ci(p["final_loss"]), ci(p["heldout_loss"]));
  }
  return t;
}

}  // namespace precsim

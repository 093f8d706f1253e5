// Sweep files to units: paths resolved against the full base configuration, every unit parsed
// strictly before anything runs.
#include "precsim/sim/experiment/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <stdexcept>

#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

std::string keys_of(const json& obj) {
  std::string s;
  for (auto it = obj.begin(); it != obj.end(); ++it) s += (s.empty() ? "" : ", ") + it.key();
  return s;
}

// The element of `config` a path names; it must already exist (the base configuration is fully
// resolved, so every settable key is there).
json& at_path(json& config, const std::string& path) {
  if (path.empty()) bad("an axis path is empty");
  json* node = &config;
  std::string walked;
  for (const std::string& part : split_path(path)) {
    const std::string where = walked.empty() ? "the configuration" : "'" + walked + "'";
    if (node->is_object()) {
      if (!node->contains(part))
        bad(fmt::format("unknown axis path '{}': '{}' is not a key of {}; keys there: {}", path, part, where, keys_of(*node)));
      node = &(*node)[part];
    } else if (node->is_array()) {
      // from_chars, not stoul: an index of 30 digits is out of range, not a std::out_of_range.
      size_t i = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), i);
      const bool digits = !part.empty() && part[0] != '-' && ec == std::errc() && end == part.data() + part.size();
      if (!digits || i >= node->size())
        bad(fmt::format("unknown axis path '{}': {} is an array of {} elements, '{}' is not an index into it", path, where,
                        node->size(), part));
      node = &(*node)[i];
    } else {
      bad(fmt::format("unknown axis path '{}': {} is a value, not an object or array", path, where));
    }
    walked += (walked.empty() ? "" : ".") + part;
  }
  return *node;
}

struct Axis {
  std::string path;
  std::vector<json> values;
};

std::vector<Axis> read_grid(const json& spec) {
  std::vector<Axis> axes;
  if (!spec.contains("grid")) return axes;
  if (!spec["grid"].is_array()) bad("\"grid\" must be an array of {\"path\", \"values\"} objects");
  for (size_t i = 0; i < spec["grid"].size(); ++i) {
    const json& a = spec["grid"][i];
    const std::string where = fmt::format("grid[{}]", i);
    if (!a.is_object()) bad(where + " must be an object {\"path\", \"values\"}");
    for (auto it = a.begin(); it != a.end(); ++it)
      if (it.key() != "path" && it.key() != "values") bad(fmt::format("{}: unknown key '{}'; allowed: path, values", where, it.key()));
    if (!a.contains("path") || !a["path"].is_string()) bad(where + ".path must be a string (a dotted configuration path)");
    if (!a.contains("values") || !a["values"].is_array()) bad(where + ".values must be an array");
    if (a["values"].empty()) bad(fmt::format("{} ('{}') is an empty axis: give it at least one value", where, a["path"].get<std::string>()));
    axes.push_back({a["path"], std::vector<json>(a["values"].begin(), a["values"].end())});
  }
  return axes;
}

std::vector<json> read_list(const json& spec) {
  if (!spec.contains("list")) return {json::object()};
  if (!spec["list"].is_array()) bad("\"list\" must be an array of {\"path\": value} objects");
  if (spec["list"].empty()) bad("\"list\" is empty: give it at least one point, or leave it out");
  std::vector<json> points;
  for (size_t i = 0; i < spec["list"].size(); ++i) {
    if (!spec["list"][i].is_object()) bad(fmt::format("list[{}] must be an object {{\"path\": value, ...}}", i));
    points.push_back(spec["list"][i]);
  }
  return points;
}

void check_top_keys(const json& spec) {
  if (!spec.is_object()) bad("expected a JSON object with \"base\" and \"grid\" and/or \"list\"");
  for (auto it = spec.begin(); it != spec.end(); ++it)
    if (it.key() != "base" && it.key() != "grid" && it.key() != "list")
      bad(fmt::format("unknown key '{}'; allowed: base, grid, list", it.key()));
  if (!spec.contains("base") || !spec["base"].is_object()) bad("\"base\" must be a train configuration object");
  if (!spec.contains("grid") && !spec.contains("list")) bad("no axes: give \"grid\" and/or \"list\"");
}

// Multiply-adds per step, roughly, times steps and runs: orders units, nothing else.
double unit_cost(const json& c) {
  const json& m = c["model"];
  double params = 0;
  if (m.contains("hidden")) {
    const json& d = c["data"];
    double in = d.value("features", 16);
    for (const auto& h : m["hidden"]) params += in * h.get<double>(), in = h.get<double>();
    params += in * std::max(d.value("classes", 1), d.value("outputs", 1));
  } else {
    const double w = m.value("width", 32);
    params = m.value("layers", 2) * 12.0 * w * w * m.value("context", 32);
  }
  return params * c["steps"].get<double>() * c["batch"].get<double>() * c["seeds"].get<double>() *
         double(c["recipes"].size() + 2);
}

}  // namespace

SweepPlan plan_sweep(const json& spec) {
  check_top_keys(spec);
  SweepPlan plan;
  plan.spec = spec;
  try {
    plan.base = train_config_to_json(train_config_from_json(spec["base"]));
  } catch (const std::exception& e) {
    bad(std::string("base: ") + e.what());
  }
  const std::vector<Axis> grid = read_grid(spec);
  const std::vector<json> list = read_list(spec);
  std::set<std::string> seen;
  auto add_path = [&](const std::string& p, const std::string& where) {
    // The resolved recipes carry every key, so a new preset under them would change nothing.
    if (p.rfind("recipes.", 0) == 0 && p.size() > 7 && p.substr(p.size() - 7) == ".preset")
      bad(fmt::format("{}: axis path '{}' would keep every other key of the resolved recipe; give the whole recipe "
                      "instead: path 'recipes.N' with preset names or recipe objects as values", where, p));
    json probe = plan.base;
    at_path(probe, p);
    if (!seen.insert(p).second) bad(fmt::format("{}: axis path '{}' is given twice", where, p));
    plan.paths.push_back(p);
  };
  for (size_t i = 0; i < list.size(); ++i)
    for (auto it = list[i].begin(); it != list[i].end(); ++it)
      if (!seen.count(it.key())) add_path(it.key(), fmt::format("list[{}]", i));
  for (size_t i = 0; i < grid.size(); ++i) add_path(grid[i].path, fmt::format("grid[{}]", i));

  // Counted in floating point first: the product of many axes would wrap around size_t.
  double units = double(list.size());
  for (const Axis& a : grid) units *= double(a.values.size());
  if (units > double(kMaxSweepUnits))
    bad(fmt::format("the sweep has {:.4g} units (list points times grid values); at most {} are allowed: split it into "
                    "several sweeps", units, kMaxSweepUnits));
  size_t grid_size = 1;
  for (const Axis& a : grid) grid_size *= a.values.size();
  std::map<std::string, size_t> by_id;
  for (size_t li = 0; li < list.size(); ++li)
    for (size_t gi = 0; gi < grid_size; ++gi) {
      json point = list[li];
      for (size_t rest = gi, a = grid.size(); a-- > 0; rest /= grid[a].values.size())
        point[grid[a].path] = grid[a].values[rest % grid[a].values.size()];
      json config = plan.base;
      for (auto it = point.begin(); it != point.end(); ++it) at_path(config, it.key()) = it.value();
      SweepUnit u;
      u.index = plan.units.size();
      u.point = point;
      try {
        u.config = train_config_to_json(train_config_from_json(config));
      } catch (const std::exception& e) {
        bad(fmt::format("unit {} (point {}): {}", u.index, point.dump(), e.what()));
      }
      u.id = results_digest(u.config).substr(7, 16);
      u.cost = unit_cost(u.config);
      const auto [it, fresh] = by_id.emplace(u.id, u.index);
      if (!fresh)
        bad(fmt::format("units {} and {} (points {} and {}) resolve to the same configuration", it->second, u.index,
                        plan.units[it->second].point.dump(), point.dump()));
      plan.units.push_back(std::move(u));
    }
  return plan;
}

std::vector<size_t> longest_first(const SweepPlan& plan, std::vector<size_t> todo) {
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) {
    if (plan.units[a].cost != plan.units[b].cost) return plan.units[a].cost > plan.units[b].cost;
    return a < b;
  });
  return todo;
}

}  // namespace precsim

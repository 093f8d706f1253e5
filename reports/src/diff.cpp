#include "precsim/reports/diff.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "precsim/reports/json_path.h"

namespace precsim {
namespace {

using Flat = std::map<std::string, const nlohmann::json*>;

Flat flatten(const nlohmann::json& j, const std::string& prefix) {
  Flat f;
  for_each_leaf(j, prefix, true, [&](const std::string& p, const nlohmann::json& v) { f[p] = &v; });
  return f;
}

std::string text(const nlohmann::json& j) {
  std::string s = j.is_string() ? j.get<std::string>() : j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// One line for two numeric series of the same length.
std::string series_difference(const nlohmann::json& a, const nlohmann::json& b) {
  size_t n = 0, at = 0;
  double worst = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (json_identical(a[i], b[i])) continue;
    ++n;
    const double x = numeric_value(a[i]), y = numeric_value(b[i]);
    const double d = std::isfinite(x) && std::isfinite(y) ? std::fabs(x - y) : INFINITY;
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  return fmt::format("{} of {} entries differ; largest |diff| {} at index {} ({} vs {})", n, a.size(), worst, at,
                     text(a[at]), text(b[at]));
}

void compare(const Flat& fa, const Flat& fb, std::vector<DiffEntry>& out) {
  std::map<std::string, bool> keys;
  for (const auto& [p, v] : fa) keys[p] = true;
  for (const auto& [p, v] : fb) keys[p] = true;
  for (const auto& [p, unused] : keys) {
    const auto ia = fa.find(p), ib = fb.find(p);
    if (ia == fa.end() || ib == fb.end()) {
      out.push_back({p, ia == fa.end() ? "absent" : text(*ia->second), ib == fb.end() ? "absent" : text(*ib->second)});
      continue;
    }
    const nlohmann::json &a = *ia->second, &b = *ib->second;
    if (json_identical(a, b)) continue;
    if (is_numeric_array(a) && is_numeric_array(b)) {
      if (a.size() == b.size()) out.push_back({p, series_difference(a, b), ""});
      else out.push_back({p, fmt::format("series of {}", a.size()), fmt::format("series of {}", b.size())});
    } else {
      out.push_back({p, text(a), text(b)});
    }
  }
}

}  // namespace

ReportDiff diff_reports(const nlohmann::json& a, const nlohmann::json& b) {
  ReportDiff d;
  for (const char* k : {"schema", "kind", "status"})
    if (a[k] != b[k]) d.envelope.push_back({k, text(a[k]), text(b[k])});
  compare(flatten(a["tool"], "tool"), flatten(b["tool"], "tool"), d.tool);
  Flat ca = flatten(a["config"], "config"), cb = flatten(b["config"], "config");
  ca.merge(flatten(a["seeds"], "seeds"));
  cb.merge(flatten(b["seeds"], "seeds"));
  compare(ca, cb, d.config);
  compare(flatten(a["results"], "results"), flatten(b["results"], "results"), d.results);
  return d;
}

std::string format_diff(const ReportDiff& d, const std::string& a_name, const std::string& b_name) {
  std::string out = fmt::format("--- {}\n+++ {}\n", a_name, b_name);
  auto section = [&](const char* title, const std::vector<DiffEntry>& es) {
    if (es.empty()) return;
    out += fmt::format("{} ({} differences)\n", title, es.size());
    for (const auto& e : es) {
      if (e.b.empty()) out += fmt::format("  {}: {}\n", e.path, e.a);
      else out += fmt::format("  {}: {} -> {}\n", e.path, e.a, e.b);
    }
  };
  section("report", d.envelope);
  section("tool (not counted)", d.tool);
  section("configuration and seeds", d.config);
  section("results", d.results);
  if (d.same()) out += "no differences in configuration, seeds or results\n";
  return out;
}

}  // namespace precsim

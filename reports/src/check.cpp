#include "precsim/reports/check.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

const std::map<std::string, CheckMode>& mode_names() {
  static const std::map<std::string, CheckMode> m = {{"exact", CheckMode::kExact},         {"bitwise", CheckMode::kBitwise},
                                                     {"ulps", CheckMode::kUlps},           {"tolerance", CheckMode::kTolerance},
                                                     {"statistical", CheckMode::kStatistical}, {"ignore", CheckMode::kIgnore}};
  return m;
}
const std::map<std::string, Reduction>& reduce_names() {
  static const std::map<std::string, Reduction> m = {
      {"series", Reduction::kNone}, {"final", Reduction::kFinal}, {"max", Reduction::kMax}, {"mean", Reduction::kMean}};
  return m;
}

template <typename Map>
std::string allowed(const Map& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s;
}

[[noreturn]] void bad_rule(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

double rule_number(const nlohmann::json& r, const std::string& where, const char* key, double lo) {
  if (!r[key].is_number()) bad_rule(where + "." + key, "must be a number, got " + r[key].dump());
  const double v = r[key].get<double>();
  if (!(v >= lo) || std::isinf(v)) bad_rule(where + "." + key, fmt::format("must be finite and >= {}, got {}", lo, r[key].dump()));
  return v;
}

}  // namespace

CheckRule tolerance_rule(double rtol, double atol) {
  CheckRule r;
  r.path = "**";
  r.mode = CheckMode::kTolerance;
  r.rtol = rtol;
  r.atol = atol;
  return r;
}

CheckRules parse_check_rules(const nlohmann::json& j) {
  if (!j.is_object()) bad_rule("rules file", std::string("must be a JSON object with \"rules\" and optional \"allow_config\", got ") + j.type_name());
  CheckRules out;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "rules" && it.key() != "allow_config")
      bad_rule("rules file", "unknown key '" + it.key() + "'; allowed: rules, allow_config");
  if (j.contains("allow_config")) {
    if (!j["allow_config"].is_array()) bad_rule("allow_config", "must be an array of paths");
    for (size_t i = 0; i < j["allow_config"].size(); ++i) {
      const auto& p = j["allow_config"][i];
      if (!p.is_string() || (p.get<std::string>().rfind("config", 0) != 0 && p.get<std::string>().rfind("seeds", 0) != 0))
        bad_rule(fmt::format("allow_config[{}]", i), "must be a path starting with config or seeds, got " + p.dump());
      out.allow_config.push_back(p);
    }
  }
  if (!j.contains("rules")) return out;
  if (!j["rules"].is_array()) bad_rule("rules", "must be an array of rule objects");
  for (size_t i = 0; i < j["rules"].size(); ++i) {
    const auto& r = j["rules"][i];
    const std::string where = fmt::format("rules[{}]", i);
    if (!r.is_object()) bad_rule(where, "must be an object");
    static const char* kKeys[] = {"path", "mode", "reduce", "format", "ulps", "rtol", "atol", "sigmas"};
    for (auto it = r.begin(); it != r.end(); ++it) {
      bool known = false;
      for (const char* k : kKeys) known |= it.key() == k;
      if (!known) bad_rule(where, "unknown key '" + it.key() + "'; allowed: path, mode, reduce, format, ulps, rtol, atol, sigmas");
    }
    CheckRule rule;
    if (!r.contains("path") || !r["path"].is_string()) bad_rule(where + ".path", "a string path is required (e.g. \"results.values.*.value\")");
    rule.path = r["path"];
    if (rule.path.rfind("results", 0) != 0 && rule.path.rfind("**", 0) != 0)
      bad_rule(where + ".path", "'" + rule.path + "' must start with results (rules apply to results; use allow_config for configuration)");
    if (!r.contains("mode") || !r["mode"].is_string()) bad_rule(where + ".mode", "required; one of " + allowed(mode_names()));
    const auto m = mode_names().find(r["mode"].get<std::string>());
    if (m == mode_names().end()) bad_rule(where + ".mode", "'" + r["mode"].get<std::string>() + "' is not one of " + allowed(mode_names()));
    rule.mode = m->second;
    if (r.contains("reduce")) {
      const auto red = r["reduce"].is_string() ? reduce_names().find(r["reduce"].get<std::string>()) : reduce_names().end();
      if (red == reduce_names().end()) bad_rule(where + ".reduce", r["reduce"].dump() + " is not one of " + allowed(reduce_names()));
      rule.reduce = red->second;
    }
    auto forbid = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (r.contains(k)) bad_rule(where + "." + k, "does not apply to mode " + r["mode"].get<std::string>());
    };
    switch (rule.mode) {
      case CheckMode::kUlps:
        if (!r.contains("format") || !r["format"].is_string()) bad_rule(where + ".format", "mode ulps needs a format name (e.g. \"bf16\")");
        rule.format = r["format"];
        try {
          format_by_name(rule.format);
        } catch (const std::invalid_argument& e) {
          bad_rule(where + ".format", e.what());
        }
        if (!r.contains("ulps")) bad_rule(where + ".ulps", "mode ulps needs the allowed distance in ulps");
        rule.ulps = rule_number(r, where, "ulps", 0);
        forbid({"rtol", "atol", "sigmas"});
        break;
      case CheckMode::kTolerance:
        if (!r.contains("rtol") && !r.contains("atol")) bad_rule(where, "mode tolerance needs rtol and/or atol");
        if (r.contains("rtol")) rule.rtol = rule_number(r, where, "rtol", 0);
        if (r.contains("atol")) rule.atol = rule_number(r, where, "atol", 0);
        forbid({"format", "ulps", "sigmas"});
        break;
      case CheckMode::kStatistical:
        if (r.contains("sigmas")) rule.sigmas = rule_number(r, where, "sigmas", 0);
        forbid({"format", "ulps", "rtol", "atol"});
        break;
      default:
        forbid({"format", "ulps", "rtol", "atol", "sigmas"});
    }
    out.rules.push_back(std::move(rule));
  }
  return out;
}

namespace {

std::string num_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);  // shortest round-trip
}

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool same_nonfinite(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b); }

struct Walker {
  const CheckRules& rules;
  const std::optional<CheckRule>& default_rule;
  std::vector<std::vector<std::string>> patterns;
  CheckOutcome out;

  void fail(const std::string& path, std::string msg) { out.failures.push_back({path, std::move(msg)}); }

  const CheckRule* rule_for(const std::vector<std::string>& path) const {
    for (size_t i = 0; i < rules.rules.size(); ++i)
      if (path_matches(patterns[i], path)) return &rules.rules[i];
    return nullptr;
  }

  // The values a rule sees: a scalar, a series, or a SeriesLog object's "value".
  static const nlohmann::json& series_of(const nlohmann::json& j) {
    if (j.is_object() && j.contains("value") && j["value"].is_array()) return j["value"];
    return j;
  }

  std::optional<double> reduce(const nlohmann::json& j, Reduction red, const std::string& path, const char* which) {
    const nlohmann::json& s = series_of(j);
    if (!s.is_array()) {
      if (!is_numeric(s)) {
        fail(path, fmt::format("{}: {} is not a number or series; reduce needs numbers", which, s.dump()));
        return std::nullopt;
      }
      return numeric_value(s);
    }
    if (s.empty()) {
      fail(path, fmt::format("{}: the series is empty; nothing to reduce", which));
      return std::nullopt;
    }
    for (const auto& e : s)
      if (!is_numeric(e)) {
        fail(path, fmt::format("{}: series entry {} is not a number", which, e.dump()));
        return std::nullopt;
      }
    if (red == Reduction::kFinal) return numeric_value(s.back());
    double acc = red == Reduction::kMax ? -INFINITY : 0.0;
    for (const auto& e : s) {
      const double v = numeric_value(e);
      if (std::isnan(v)) return v;
      acc = red == Reduction::kMax ? std::max(acc, v) : acc + v;  // in order: reproducible
    }
    return red == Reduction::kMean ? acc / static_cast<double>(s.size()) : acc;
  }

  // One pair of numbers under a numeric mode; "" when it passes, else why not.
  static std::string compare_numbers(const CheckRule& r, double base, double run) {
    switch (r.mode) {
      case CheckMode::kTolerance: {
        if (same_nonfinite(base, run)) return "";
        const double diff = std::fabs(run - base), allowed = r.atol + r.rtol * std::fabs(base);
        if (diff <= allowed) return "";
        return fmt::format("{} vs baseline {}: |diff| {} > atol {} + rtol {} * |baseline| = {}", num_text(run), num_text(base),
                           num_text(diff), r.atol, r.rtol, num_text(allowed));
      }
      case CheckMode::kUlps: {
        if (same_nonfinite(base, run)) return "";
        if (!std::isfinite(base) || !std::isfinite(run)) return fmt::format("{} vs baseline {}", num_text(run), num_text(base));
        const Format f = format_by_name(r.format);
        QuantOptions o;
        o.overflow = Overflow::kSaturate;
        const int64_t d = ordinal(f, encode(f, run, o).code) - ordinal(f, encode(f, base, o).code);
        if (static_cast<double>(d < 0 ? -d : d) <= r.ulps) return "";
        return fmt::format("{} vs baseline {}: {} ulps of {} apart > {}", num_text(run), num_text(base), d < 0 ? -d : d,
                           f.name, r.ulps);
      }
      default:  // exact and bitwise on numbers
        if (bits_of(base) == bits_of(run) || (std::isnan(base) && std::isnan(run))) return "";
        return fmt::format("{} vs baseline {} (bits differ)", num_text(run), num_text(base));
    }
  }

  void compare_values(const CheckRule& r, const nlohmann::json& b, const nlohmann::json& x, const std::string& path) {
    ++out.compared;
    if (r.mode == CheckMode::kExact || r.mode == CheckMode::kBitwise) {
      if (!json_identical(b, x)) {
        if (b.is_array() && x.is_array() && b.size() == x.size()) {
          size_t n = 0, first = 0;
          for (size_t i = 0; i < b.size(); ++i)
            if (!json_identical(b[i], x[i]) && n++ == 0) first = i;
          fail(path, fmt::format("{} of {} entries differ; first at index {}: {} vs baseline {}", n, b.size(), first,
                                 x[first].dump(), b[first].dump()));
        } else {
          fail(path, fmt::format("{} vs baseline {}", abbreviate(x), abbreviate(b)));
        }
      }
      return;
    }
    const nlohmann::json& bs = series_of(b);
    const nlohmann::json& xs = series_of(x);
    if (bs.is_array() != xs.is_array() || (bs.is_array() && bs.size() != xs.size())) {
      fail(path, fmt::format("shape differs: {} vs baseline {}", shape_text(xs), shape_text(bs)));
      return;
    }
    if (!bs.is_array()) {
      if (!is_numeric(bs) || !is_numeric(xs)) {
        if (!json_identical(bs, xs)) fail(path, fmt::format("{} vs baseline {}", abbreviate(xs), abbreviate(bs)));
        return;
      }
      const std::string why = compare_numbers(r, numeric_value(bs), numeric_value(xs));
      if (!why.empty()) fail(path, why);
      return;
    }
    size_t n = 0, first = 0;
    std::string first_why;
    for (size_t i = 0; i < bs.size(); ++i) {
      std::string why;
      if (is_numeric(bs[i]) && is_numeric(xs[i])) why = compare_numbers(r, numeric_value(bs[i]), numeric_value(xs[i]));
      else if (!json_identical(bs[i], xs[i])) why = fmt::format("{} vs baseline {}", xs[i].dump(), bs[i].dump());
      if (!why.empty() && n++ == 0) {
        first = i;
        first_why = why;
      }
    }
    if (n) fail(path, fmt::format("{} of {} entries outside the rule; first at index {}: {}", n, bs.size(), first, first_why));
  }

  static std::string shape_text(const nlohmann::json& j) {
    return j.is_array() ? fmt::format("array of {}", j.size()) : std::string("a ") + j.type_name();
  }
  static std::string abbreviate(const nlohmann::json& j) {
    std::string s = j.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }

  // Interval mean +- sigmas * s / sqrt(n) of an ensemble; an object {"lo", "hi"} is taken as is.
  std::optional<std::pair<double, double>> interval(const nlohmann::json& j, const CheckRule& r, const std::string& path,
                                                    const char* which) {
    if (j.is_object() && j.contains("lo") && j.contains("hi") && is_numeric(j["lo"]) && is_numeric(j["hi"]))
      return std::pair{numeric_value(j["lo"]), numeric_value(j["hi"])};
    if (!j.is_array() || j.empty()) {
      fail(path, fmt::format("{}: statistical mode needs an array of per-seed values or {{\"lo\", \"hi\"}}, got {}", which,
                             shape_text(j)));
      return std::nullopt;
    }
    std::vector<double> xs;
    for (const auto& e : j) {
      // A per-seed series is reduced first (its final value unless the rule names a reduction).
      const auto v = reduce(e, r.reduce == Reduction::kNone ? Reduction::kFinal : r.reduce, path, which);
      if (!v) return std::nullopt;
      xs.push_back(*v);
    }
    double mean = 0;
    for (double v : xs) mean += v;
    mean /= static_cast<double>(xs.size());
    double ss = 0;
    for (double v : xs) ss += (v - mean) * (v - mean);
    const double se = xs.size() > 1 ? std::sqrt(ss / static_cast<double>(xs.size() - 1) / static_cast<double>(xs.size())) : 0.0;
    return std::pair{mean - r.sigmas * se, mean + r.sigmas * se};
  }

  void apply(const CheckRule& r, const nlohmann::json& b, const nlohmann::json& x, const std::string& path) {
    if (r.mode == CheckMode::kIgnore) return;
    if (r.mode == CheckMode::kStatistical) {
      ++out.compared;
      const auto ib = interval(b, r, path, "baseline");
      const auto ix = interval(x, r, path, "run");
      if (!ib || !ix) return;
      const bool overlap = ib->first <= ix->second && ix->first <= ib->second;
      if (!overlap)
        fail(path, fmt::format("intervals do not overlap: run [{}, {}] vs baseline [{}, {}] ({} sigmas)", num_text(ix->first),
                               num_text(ix->second), num_text(ib->first), num_text(ib->second), r.sigmas));
      return;
    }
    if (r.reduce != Reduction::kNone) {
      static const char* kName[] = {"series", "final", "max", "mean"};
      const auto vb = reduce(b, r.reduce, path, "baseline");
      const auto vx = reduce(x, r.reduce, path, "run");
      ++out.compared;
      if (!vb || !vx) return;
      const std::string why = compare_numbers(r, *vb, *vx);
      if (!why.empty()) fail(path + " (" + kName[static_cast<int>(r.reduce)] + ")", why);
      return;
    }
    compare_values(r, b, x, path);
  }

  void walk(std::vector<std::string>& segs, const nlohmann::json& b, const nlohmann::json& x) {
    const std::string path = join_path(segs);
    if (const CheckRule* r = rule_for(segs)) {
      apply(*r, b, x, path);
      return;
    }
    if (b.is_object() && x.is_object()) {
      for (auto it = b.begin(); it != b.end(); ++it)
        if (!x.contains(it.key())) fail(path + "." + it.key(), "missing in the run (present in the baseline)");
      for (auto it = x.begin(); it != x.end(); ++it) {
        const auto bit = b.find(it.key());
        if (bit == b.end()) {
          fail(path + "." + it.key(), "not in the baseline (new in the run)");
          continue;
        }
        segs.push_back(it.key());
        walk(segs, *bit, it.value());
        segs.pop_back();
      }
      return;
    }
    const bool numeric_series = is_numeric_array(b) && is_numeric_array(x);
    if (b.is_array() && x.is_array() && !(numeric_series && default_rule)) {
      if (numeric_series && b.size() == x.size()) {
        // A series with no rule: compared exactly, reported once with its first difference.
        CheckRule exact;
        compare_values(exact, b, x, path);
        return;
      }
      if (b.size() != x.size()) {
        ++out.compared;
        fail(path, fmt::format("array of {} entries vs baseline {}", x.size(), b.size()));
        return;
      }
      for (size_t i = 0; i < b.size(); ++i) {
        segs.push_back(std::to_string(i));
        walk(segs, b[i], x[i]);
        segs.pop_back();
      }
      return;
    }
    if (default_rule && (is_numeric(b) || numeric_series) && (is_numeric(x) || is_numeric_array(x))) {
      compare_values(*default_rule, b, x, path);
      return;
    }
    compare_values(CheckRule{}, b, x, path);
  }
};

std::vector<std::string> config_differences(const nlohmann::json& b, const nlohmann::json& x, const CheckRules& rules) {
  std::map<std::string, nlohmann::json> fb, fx;
  for (const char* section : {"config", "seeds"}) {
    for_each_leaf(b[section], section, false, [&](const std::string& p, const nlohmann::json& v) { fb[p] = v; });
    for_each_leaf(x[section], section, false, [&](const std::string& p, const nlohmann::json& v) { fx[p] = v; });
  }
  std::vector<std::string> diffs;
  auto allowed_path = [&](const std::string& p) {
    for (const auto& a : rules.allow_config)
      if (path_matches(a, p)) return true;
    return false;
  };
  auto text = [](const std::map<std::string, nlohmann::json>& m, const std::string& p) {
    const auto it = m.find(p);
    return it == m.end() ? std::string("absent") : it->second.dump();
  };
  std::map<std::string, bool> keys;
  for (const auto& [p, v] : fb) keys[p] = true;
  for (const auto& [p, v] : fx) keys[p] = true;
  for (const auto& [p, unused] : keys) {
    const auto ib = fb.find(p), ix = fx.find(p);
    const bool same = ib != fb.end() && ix != fx.end() && json_identical(ib->second, ix->second);
    if (!same && !allowed_path(p)) diffs.push_back(fmt::format("{} (baseline {}, run {})", p, text(fb, p), text(fx, p)));
  }
  return diffs;
}

}  // namespace

CheckOutcome check_report(const nlohmann::json& baseline, const nlohmann::json& run, const CheckRules& rules,
                          const std::optional<CheckRule>& default_rule) {
  if (baseline["schema"] != run["schema"])
    throw CheckRefused(fmt::format("baseline schema {} differs from the run's {}", baseline["schema"].dump(), run["schema"].dump()));
  if (baseline["kind"] != run["kind"])
    throw CheckRefused(fmt::format("baseline is a {} report, the run a {} report; compare reports of one kind",
                                   baseline["kind"].get<std::string>(), run["kind"].get<std::string>()));
  const auto diffs = config_differences(baseline, run, rules);
  if (!diffs.empty()) {
    std::string msg = "the baseline's configuration differs from the run's at:";
    for (const auto& d : diffs) msg += "\n  " + d;
    msg += "\n(list keys that may differ in the rules file's \"allow_config\")";
    throw CheckRefused(msg);
  }
  Walker w{rules, default_rule, {}, {}};
  for (const auto& r : rules.rules) w.patterns.push_back(split_path(r.path));
  for (const auto* doc : {&baseline, &run}) {
    const char* which = doc == &baseline ? "baseline" : "run";
    const std::string recomputed = results_digest((*doc)["results"]);
    if ((*doc)["digest"] != recomputed)
      w.fail("digest", fmt::format("the {}'s stored digest {} does not match its results ({}): edited or corrupted", which,
                                   (*doc)["digest"].get<std::string>(), recomputed));
  }
  if (run["status"] != "complete") w.fail("status", fmt::format("the run is {}, not complete", run["status"].dump()));
  if (baseline["status"] != "complete") w.fail("status", fmt::format("the baseline is {}, not complete", baseline["status"].dump()));
  std::vector<std::string> segs{"results"};
  w.walk(segs, baseline["results"], run["results"]);
  return std::move(w.out);
}

}  // namespace precsim

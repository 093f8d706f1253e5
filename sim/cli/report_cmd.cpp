// precsim report summary|diff|check|validate|export: read reports back. Exit codes: 0 fine,
// 1 a difference or a check failure, 2 a file that is not a readable precsim report or a bad
// option (cli_common.h).
#include <fmt/format.h>

#include <array>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command_tables.h"
#include "precsim/reports/check.h"
#include "precsim/reports/diff.h"
#include "precsim/reports/export_csv.h"
#include "precsim/reports/json_path.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/summary.h"
#include "precsim/sim/analysis/recipe_compare.h"

namespace precsim::cli {
namespace {

nlohmann::json load(const std::string& path) {
  try {
    return load_report(path);
  } catch (const ReportError& e) {
    throw UsageError(e.what());
  }
}

[[noreturn]] void exit_with(int code) {
  std::cout.flush();
  std::exit(code);
}

struct CheckArgs {
  std::string baseline, run, rules, junit;
  double rtol = -1, atol = -1;
};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

// JUnit XML as CI systems read it: one test suite for the run, one test case per metric that
// failed and one for the metrics within their rules.
std::string junit_xml(const CheckArgs& a, const CheckOutcome& o, const std::vector<std::string>& paths) {
  const size_t passed = o.compared >= o.failures.size() ? o.compared - o.failures.size() : 0;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites><testsuite name=\"precsim report check {}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
                   xml_escape(a.run), o.failures.size() + 1, o.failures.size());
  x += fmt::format("  <properties><property name=\"baseline\" value=\"{}\"/></properties>\n", xml_escape(a.baseline));
  for (size_t i = 0; i < o.failures.size(); ++i)
    x += fmt::format("  <testcase classname=\"precsim.report.check\" name=\"{}\"><failure message=\"{}\"/></testcase>\n",
                     xml_escape(paths[i]), xml_escape(o.failures[i].message));
  x += fmt::format("  <testcase classname=\"precsim.report.check\" name=\"{} metrics within their rules\"/>\n", passed);
  return x + "</testsuite></testsuites>\n";
}

void run_check(const CheckArgs& a) {
  CheckRules rules;
  if (!a.rules.empty()) {
    nlohmann::json j;
    try {
      j = read_json_file(a.rules);
      rules = parse_check_rules(j);
    } catch (const ReportError& e) {
      throw UsageError(std::string("--rules: ") + e.what());
    } catch (const std::invalid_argument& e) {
      throw UsageError("--rules '" + a.rules + "': " + e.what());
    }
  }
  if (!a.junit.empty()) check_destination("--junit", a.junit);
  std::optional<CheckRule> tol;
  if (a.rtol >= 0 || a.atol >= 0) tol = tolerance_rule(std::max(a.rtol, 0.0), std::max(a.atol, 0.0));
  const nlohmann::json base = load(a.baseline), run = load(a.run);
  CheckOutcome o;
  try {
    o = check_report(base, run, rules, tol);
  } catch (const CheckRefused& e) {
    throw UsageError(fmt::format("cannot check '{}' against baseline '{}': {}", a.run, a.baseline, e.what()));
  }
  std::vector<std::string> paths;
  for (const auto& f : o.failures) paths.push_back(readable_path(run, f.path));
  for (size_t i = 0; i < o.failures.size(); ++i) std::cout << fmt::format("FAIL {}: {}\n", paths[i], o.failures[i].message);
  if (!a.junit.empty()) {
    write_file_atomic(a.junit, junit_xml(a, o, paths));
    note() << "wrote " << a.junit << "\n";
  }
  std::cout << fmt::format("{}: {} metrics compared with baseline {}, {} outside their rule: {}\n", a.run, o.compared,
                           a.baseline, o.failures.size(), o.passed() ? "PASS" : "FAIL");
  if (!o.passed()) exit_with(kExitCheckFailed);
}

struct SummaryArgs {
  std::string file;
  size_t rows = 20;
  bool full = false;
};

// Every kind prints the table its command printed (train and demo: the variant table); the
// configuration and per-seed series stay one --full away.
void run_summary(const SummaryArgs& a) {
  const nlohmann::json doc = load(a.file);
  const std::string kind = doc["kind"].get<std::string>();
  std::optional<std::string> table;
  if (!a.full) {
    try {
      table = command_table(doc);
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("report summary '{}': the {} results have no table ({})", a.file, kind, e.what()));
    }
  }
  if (table) std::cout << report_header(doc) << "\n" << *table;
  else std::cout << summarize_report(doc, {.max_rows = a.rows});
}

void add_summary(CLI::App* cmd) {
  auto* summary = cmd->add_subcommand(
      "summary", "the table the command printed when it ran (every kind: formats, quantize, analyze, dot, gemm, "
                 "allreduce, train, demo, sweep, attribute, search); --full for the configuration and every result as a tree");
  auto s = std::make_shared<SummaryArgs>();
  summary->add_option("report", s->file, "report JSON file")->required();
  summary->add_option("--rows", s->rows, "rows of each array in the tree of --full (default 20)")->check(CLI::Range(size_t{1}, size_t{1} << 40));
  summary->add_flag("--full", s->full, "configuration, seeds and every result as a tree, whatever the kind");
  summary->callback([s] { run_summary(*s); });
}

void add_diff(CLI::App* cmd) {
  auto* diff = cmd->add_subcommand("diff", "what differs between two reports (exit 1 when they differ)");
  auto d = std::make_shared<std::pair<std::string, std::string>>();
  diff->add_option("first", d->first, "first report")->required();
  diff->add_option("second", d->second, "second report")->required();
  diff->callback([d] {
    const nlohmann::json da = load(d->first), db = load(d->second);
    auto r = diff_reports(da, db);
    for (auto* section : {&r.config, &r.results})
      for (auto& e : *section) {
        const std::string named = readable_path(da, e.path);
        e.path = named != e.path ? named : readable_path(db, e.path);
      }
    std::cout << format_diff(r, d->first, d->second);
    if (!r.same()) exit_with(kExitCheckFailed);
  });
}

void add_compare(CLI::App* cmd) {
  auto* compare = cmd->add_subcommand(
      "compare", "two variants of a train report, paired by seed: per-seed differences, their mean with a 95% interval, "
                 "and a verdict against seed noise and the chaos floor");
  auto cmp = std::make_shared<std::array<std::string, 4>>(std::array<std::string, 4>{"", "", "", "heldout_loss"});
  compare->add_option("report", (*cmp)[0], "train or demo report (run with --seeds 3 or more for an interval)")->required();
  compare->add_option("--a", (*cmp)[1], "variant name (the baseline of the difference b - a)")->required();
  compare->add_option("--b", (*cmp)[2], "variant name")->required();
  compare->add_option("--metric", (*cmp)[3], "a key of the variants' summary (default heldout_loss)");
  auto as_json = std::make_shared<bool>(false);
  compare->add_flag("--json", *as_json, "print the JSON report on stdout and nothing else");
  compare->footer(
      "--json: the comparison with its verdict by name (one-seed, seed-noise, chaos-floor, different). Exit status: 1 "
      "when the verdict is \"different\", 0 otherwise (one seed gives no verdict), 2 on bad input.");
  compare->callback([cmp, as_json] {
    const auto& [file, a, b, metric] = *cmp;
    RecipeComparison c;
    try {
      c = compare_recipes(load(file), a, b, metric);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("report compare '{}': {}", file, e.what()));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("report compare '{}': not a train report's results ({})", file, e.what()));
    }
    // A CI step fails on a real difference, as report check fails on a metric outside its rule.
    std::cout << (*as_json ? comparison_json(c).dump(2) + "\n" : format_comparison(c));
    if (c.verdict == CompareVerdict::kDifferent) exit_with(kExitCheckFailed);
  });
}

void add_check(CLI::App* cmd) {
  auto* check = cmd->add_subcommand("check",
                                    "regression check of a run against a baseline; exit 1 naming every metric outside its rule");
  auto c = std::make_shared<CheckArgs>();
  check->add_option("--baseline", c->baseline, "baseline report")->required();
  check->add_option("report", c->run, "the run's report")->required();
  check->add_option("--rules", c->rules,
                    "rules file, JSON: {\"allow_config\": [PATH...], \"rules\": [{\"path\": PATH, \"mode\": "
                    "exact|bitwise|ulps|tolerance|statistical|ignore, \"format\": F, \"ulps\": N (ulps), \"rtol\", "
                    "\"atol\" (tolerance), \"sigmas\" (statistical, 3), \"reduce\": final|max|mean}]}; PATH is dotted "
                    "with globs (results.variants.*.summary.loss, ** any depth); the first matching rule decides, "
                    "no rule: identical");
  check->add_option("--rtol", c->rtol, "relative tolerance for numeric metrics no rule names")->check(CLI::NonNegativeNumber);
  check->add_option("--junit", c->junit, "also write the outcome as JUnit XML to FILE (one test case per failing metric)");
  check->add_option("--atol", c->atol, "absolute tolerance for numeric metrics no rule names")->check(CLI::NonNegativeNumber);
  check->callback([c] { run_check(*c); });
}

void add_validate(CLI::App* cmd) {
  auto* validate = cmd->add_subcommand("validate", "check reports against the precsim.report/1 rules (exit 1 if invalid)");
  auto v = std::make_shared<std::vector<std::string>>();
  validate->add_option("reports", *v, "report files")->required();
  validate->callback([v] {
    bool ok = true;
    for (const auto& path : *v) {
      const nlohmann::json doc = load(path);
      const auto problems = validate_report(doc);
      for (const auto& p : problems) std::cout << fmt::format("{}: {}\n", path, p);
      if (problems.empty())
        std::cout << fmt::format("{}: valid {} report ({}, digest matches)\n", path, doc["kind"].get<std::string>(),
                                 doc["schema"].get<std::string>());
      ok = ok && problems.empty();
    }
    if (!ok) exit_with(kExitCheckFailed);
  });
}

void add_export(CLI::App* cmd) {
  auto* exp = cmd->add_subcommand("export", "write a report's tables and series as CSV files");
  auto e = std::make_shared<std::pair<std::string, std::string>>();
  exp->add_option("--csv", e->first, "folder for the CSV files (created if missing)")->required();
  exp->add_option("report", e->second, "report file")->required();
  exp->callback([e] {
    const nlohmann::json doc = load(e->second);
    std::vector<std::string> files;
    try {
      files = export_csv(doc, e->first);
    } catch (const std::runtime_error& err) {
      throw UsageError(std::string("--csv: ") + err.what());
    }
    for (const auto& f : files) std::cout << (std::filesystem::path(e->first) / f).string() << "\n";
  });
}

const Registrar reg(90, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "read reports back: summary, diff, compare, check, validate, export");
  cmd->require_subcommand(1);
  add_summary(cmd);
  add_diff(cmd);
  add_compare(cmd);
  add_check(cmd);
  add_validate(cmd);
  add_export(cmd);
});

}  // namespace
}  // namespace precsim::cli

// precsim report summary|diff|check|validate|export: read reports back. Exit codes: 0 fine,
// 1 a difference or a check failure, 2 a file that is not a readable precsim report or a bad
// option (cli_common.h).
#include <fmt/format.h>

#include <array>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "precsim/reports/check.h"
#include "precsim/reports/diff.h"
#include "precsim/reports/export_csv.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/summary.h"
#include "precsim/sim/analysis/recipe_compare.h"
#include "precsim/sim/experiment/runner.h"

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
  std::string baseline, run, rules;
  double rtol = -1, atol = -1;
};

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
  std::optional<CheckRule> tol;
  if (a.rtol >= 0 || a.atol >= 0) tol = tolerance_rule(std::max(a.rtol, 0.0), std::max(a.atol, 0.0));
  const nlohmann::json base = load(a.baseline), run = load(a.run);
  CheckOutcome o;
  try {
    o = check_report(base, run, rules, tol);
  } catch (const CheckRefused& e) {
    throw UsageError(fmt::format("cannot check '{}' against baseline '{}': {}", a.run, a.baseline, e.what()));
  }
  for (const auto& f : o.failures) std::cout << fmt::format("FAIL {}: {}\n", f.path, f.message);
  std::cout << fmt::format("{}: {} metrics compared with baseline {}, {} outside their rule: {}\n", a.run, o.compared,
                           a.baseline, o.failures.size(), o.passed() ? "PASS" : "FAIL");
  if (!o.passed()) exit_with(kExitCheckFailed);
}

struct SummaryArgs {
  std::string file;
  size_t rows = 20;
  bool full = false;
};

// Train and demo reports print the variant table their command printed; the configuration and
// per-seed series stay one --full away.
void run_summary(const SummaryArgs& a) {
  const nlohmann::json doc = load(a.file);
  const std::string kind = doc["kind"].get<std::string>();
  if (a.full || (kind != "train" && kind != "demo")) {
    std::cout << summarize_report(doc, {.max_rows = a.rows});
    return;
  }
  std::cout << report_header(doc) << "\n";
  try {
    std::cout << summary_table(doc["results"]);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("report summary '{}': the {} results have no variant table ({})", a.file, kind, e.what()));
  }
  const auto& results = doc.at("results");
  if (results.contains("runs") && results.at("runs").is_array() && results.at("runs").size() > 1)
    std::cout << fmt::format("({} seeds; ± is the 95% interval of the mean; report compare pairs two variants by seed)\n",
                             results.at("runs").size());
}

const Registrar reg(90, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "read reports back: summary, diff, compare, check, validate, export");
  cmd->require_subcommand(1);

  auto* summary = cmd->add_subcommand(
      "summary", "the table the command printed when it ran (train, demo), or for other kinds every result as a tree");
  auto s = std::make_shared<SummaryArgs>();
  summary->add_option("report", s->file, "report JSON file")->required();
  summary->add_option("--rows", s->rows, "table rows to show (default 20)")->check(CLI::Range(size_t{1}, size_t{1} << 40));
  summary->add_flag("--full", s->full, "configuration, seeds and every result as a tree, whatever the kind");
  summary->callback([s] { run_summary(*s); });

  auto* diff = cmd->add_subcommand("diff", "what differs between two reports (exit 1 when they differ)");
  auto d = std::make_shared<std::pair<std::string, std::string>>();
  diff->add_option("a", d->first, "first report")->required();
  diff->add_option("b", d->second, "second report")->required();
  diff->callback([d] {
    const auto r = diff_reports(load(d->first), load(d->second));
    std::cout << format_diff(r, d->first, d->second);
    if (!r.same()) exit_with(kExitCheckFailed);
  });

  auto* compare = cmd->add_subcommand(
      "compare", "two variants of a train report, paired by seed: per-seed differences, their mean with a 95% interval, "
                 "and a verdict against seed noise and the chaos floor");
  auto cmp = std::make_shared<std::array<std::string, 4>>(std::array<std::string, 4>{"", "", "", "heldout_loss"});
  compare->add_option("report", (*cmp)[0], "train or demo report (run with --seeds 3 or more for an interval)")->required();
  compare->add_option("--a", (*cmp)[1], "variant name (the baseline of the difference b - a)")->required();
  compare->add_option("--b", (*cmp)[2], "variant name")->required();
  compare->add_option("--metric", (*cmp)[3], "a key of the variants' summary (default heldout_loss)");
  compare->callback([cmp] {
    const auto& [file, a, b, metric] = *cmp;
    try {
      std::cout << format_comparison(compare_recipes(load(file), a, b, metric));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("report compare '{}': {}", file, e.what()));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("report compare '{}': not a train report's results ({})", file, e.what()));
    }
  });

  auto* check = cmd->add_subcommand("check",
                                    "regression check of a run against a baseline; exit 1 naming every metric outside its rule");
  auto c = std::make_shared<CheckArgs>();
  check->add_option("--baseline", c->baseline, "baseline report")->required();
  check->add_option("report", c->run, "the run's report")->required();
  check->add_option("--rules", c->rules, "rules file (JSON; see reports/include/precsim/reports/check.h)");
  check->add_option("--rtol", c->rtol, "relative tolerance for numeric metrics no rule names")->check(CLI::NonNegativeNumber);
  check->add_option("--atol", c->atol, "absolute tolerance for numeric metrics no rule names")->check(CLI::NonNegativeNumber);
  check->callback([c] { run_check(*c); });

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
});

}  // namespace
}  // namespace precsim::cli

// Training runs and reports: train(config) gives the same document as `precsim train --json`;
// load, validate and check are `precsim report`'s. Documents cross as Python objects (py_json.h).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "precsim/reports/check.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"
#include "precsim/reports/summary.h"
#include "precsim/sim/analysis/recipe_compare.h"
#include "precsim/sim/experiment/attribution.h"
#include "precsim/sim/experiment/runner.h"
#include "py_common.h"
#include "py_json.h"
#include "signals.h"

namespace precsim::py {

TrainConfig train_config_of(nb::handle config) {
  const nlohmann::json j = nb::isinstance<nb::str>(config) ? parse_json_file(nb::cast<std::string>(config), "config")
                                                           : json_from_py(config, "config");
  try {
    return train_config_from_json(j);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("config: ") + e.what());
  }
}

namespace {

// An OSError naming the path, as Python's own file functions raise.
[[noreturn]] void os_error(const std::runtime_error& e) {
  PyErr_SetString(PyExc_OSError, e.what());
  throw nb::python_error();
}

// `precsim train`'s report; with `out`, written there atomically as --out does (checked writable
// first). Ctrl-C stops it after the step in progress, as the CLI's SIGINT does: the report of what
// finished ("status": "interrupted") is written to `out` and set as the KeyboardInterrupt's
// `report` attribute, and the KeyboardInterrupt is raised.
nb::any train(nb::handle config, bool deterministic, std::optional<std::string> out) {
  const TrainConfig c = train_config_of(config);
  try {
    if (out) check_writable(*out);
  } catch (const std::runtime_error& e) {
    os_error(e);
  }
  Report r("train");
  r.config() = train_config_to_json(c);
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  r.seeds() = {{"seed", c.seed}, {"seeds", seeds}};
  SignalPoll signals;
  RunHooks hooks;
  hooks.stop = [&signals] { return signals.poll(); };
  nlohmann::json doc;
  {
    nb::gil_scoped_release release;
    r.results() = run_training(c, hooks);
    if (signals.raised()) r.set_status("interrupted");
    doc = r.document(deterministic);
  }
  if (out) {
    try {
      nb::gil_scoped_release release;
      write_file_atomic(*out, doc.dump(2) + "\n");
    } catch (const std::runtime_error& e) {
      os_error(e);
    }
  }
  nb::any report = py_from_json(doc);
  if (signals.raised()) {
    signals.set_attr("report", report);
    signals.rethrow();
  }
  return report;
}

// A report given as a dict, or as the path of a report file (read as `precsim report` reads it).
nlohmann::json document_of(nb::handle doc, const std::string& what) {
  if (!nb::isinstance<nb::str>(doc)) return json_from_py(doc, what);
  const std::string path = nb::cast<std::string>(doc);
  nb::gil_scoped_release release;
  return load_report(path);
}

nb::any check(nb::handle baseline, nb::handle run, nb::handle rules, std::optional<double> rtol,
                 std::optional<double> atol) {
  const nlohmann::json base = document_of(baseline, "baseline"), doc = document_of(run, "run");
  std::optional<nlohmann::json> rule_doc;
  if (!rules.is_none())
    rule_doc = nb::isinstance<nb::str>(rules) ? parse_json_file(nb::cast<std::string>(rules), "rules")
                                              : json_from_py(rules, "rules");
  nlohmann::json out;
  {
    // Documents may be large (per-step series): checked without the GIL.
    nb::gil_scoped_release release;
    check_envelope(base, "baseline");
    check_envelope(doc, "run");
    const CheckRules r = rule_doc ? parse_check_rules(*rule_doc) : CheckRules{};
    std::optional<CheckRule> tol;
    if (rtol || atol) tol = tolerance_rule(rtol.value_or(0.0), atol.value_or(0.0));
    const CheckOutcome o = check_report(base, doc, r, tol);
    out = {{"passed", o.passed()}, {"compared", o.compared}, {"failures", nlohmann::json::array()}};
    for (const auto& f : o.failures) out["failures"].push_back({{"path", f.path}, {"message", f.message}});
  }
  return py_from_json(out);
}

// A report of `kind` around results computed in Python (precsim.torch.side_by_side): the tool
// block, the digest and the environment as every report of the CLI has them (the caller sets the
// environment's wall time and writes the file).
nb::any make_report(const std::string& kind, nb::handle config, nb::handle seeds, nb::handle results,
                       bool deterministic, const std::vector<std::string>& command_line) {
  Report r(kind);
  r.config() = json_from_py(config, "config");
  r.seeds() = json_from_py(seeds, "seeds");
  r.results() = json_from_py(results, "results");
  std::vector<const char*> argv;
  for (const auto& a : command_line) argv.push_back(a.c_str());
  r.set_command_line(int(argv.size()), argv.data());
  nlohmann::json doc;
  {
    nb::gil_scoped_release release;
    doc = r.document(deterministic);
  }
  return py_from_json(doc);
}

// Attribution of a model trained outside the engine (precsim.torch.attribute): role and GEMM-pass
// units only, as layer units name the layers of precsim's own models.
std::vector<AttributionUnit> torch_units(const std::string& kind, const std::vector<std::string>& only) {
  if (kind != "role" && kind != "gemm")
    throw std::invalid_argument("unit '" + kind + "' is not available for a PyTorch model; allowed: role, gemm");
  return attribution_units(TrainConfig{}, kind, only);
}

nb::any attribution_results_of(const Recipe& r, const std::string& kind, const std::vector<std::string>& only,
                                  const std::string& metric,
                                  const std::vector<std::vector<std::vector<double>>>& metrics,
                                  const std::vector<double>& chaos_loss, const std::vector<double>& reference_heldout,
                                  int distinct) {
  CounterfactualRuns runs;
  for (const auto& per_seed : metrics) {
    auto& out = runs.metrics.emplace_back();
    for (const auto& m : per_seed) {
      if (m.size() != 3) throw std::invalid_argument("attribution metrics: 3 values per seed (final, heldout, local)");
      out.push_back({m[0], m[1], m[2]});
    }
    if (out.size() != chaos_loss.size()) throw std::invalid_argument("attribution metrics: one entry per seed");
  }
  runs.chaos_loss = chaos_loss;
  runs.reference_heldout = reference_heldout;
  runs.distinct = distinct;
  return py_from_json(attribution_results(r, torch_units(kind, only), kind, metric, runs));
}

std::vector<std::string> validate(nb::handle report) {
  const nlohmann::json doc = document_of(report, "report");
  nb::gil_scoped_release release;
  check_envelope(doc, "report");
  return validate_report(doc);
}

nb::any compare(nb::handle report, const std::string& a, const std::string& b, const std::string& metric) {
  const nlohmann::json doc = document_of(report, "report");
  nlohmann::json out;
  {
    nb::gil_scoped_release release;
    check_envelope(doc, "report");
    try {
      out = comparison_json(compare_recipes(doc, a, b, metric));
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(std::string("not a train report's results (") + e.what() + ")");
    }
  }
  return py_from_json(out);
}

std::string summary_tree(nb::handle report, size_t rows) {
  if (rows < 1) throw std::invalid_argument("rows " + std::to_string(rows) + " is out of range; allowed: 1 or more");
  const nlohmann::json doc = document_of(report, "report");
  nb::gil_scoped_release release;
  check_envelope(doc, "report");
  return summarize_report(doc, {.max_rows = rows});
}

}  // namespace

void bind_reports(nb::module_& m) {
  nb::exception<ReportError>(m, "ReportError", PyExc_ValueError);
  nb::exception<CheckRefused>(m, "CheckRefused", PyExc_ValueError);
  m.def("train", &train, nb::arg("config"), nb::arg("deterministic"), nb::arg("out").none(),
        "`precsim train`'s report of a config (a dict, or the path of a JSON file); Ctrl-C: see train().");
  m.def("load_report", [](const std::string& path) {
    nlohmann::json doc;
    {
      nb::gil_scoped_release release;
      doc = load_report(path);
    }
    return py_from_json(doc);
  }, nb::arg("path"));
  m.def("make_report", &make_report, nb::arg("kind"), nb::arg("config"), nb::arg("seeds"), nb::arg("results"),
        nb::arg("deterministic"), nb::arg("command_line"),
        "A report document around results: the tool block, the digest and (not deterministic) the environment.");
  m.def(
      "attribution_plan",
      [](const Recipe& r, const std::string& kind, const std::vector<std::string>& units, const std::string& metric) {
        return attribution_plan(r, torch_units(kind, units), metric);
      },
      nb::arg("recipe"), nb::arg("kind"), nb::arg("units"), nb::arg("metric"),
      "The counterfactual recipes of an attribution: R, H, then per unit leave-one-out and leave-one-in.");
  m.def("attribution_results", &attribution_results_of, nb::arg("recipe"), nb::arg("kind"), nb::arg("units"),
        nb::arg("metric"), nb::arg("metrics"), nb::arg("chaos_loss"), nb::arg("reference_heldout"), nb::arg("distinct"),
        "An attribute report's results from per recipe, per seed [final_loss, heldout_loss, local_grad_rel_err].");
  m.def("validate_report", &validate, nb::arg("report"), "Every problem found; a str is the path of a report file.");
  m.def("check_report", &check, nb::arg("baseline"), nb::arg("run"), nb::arg("rules").none(), nb::arg("rtol").none(),
        nb::arg("atol").none(), "`precsim report check`; a str is the path of a report (or rules) file.");
  m.def("compare_recipes", &compare, nb::arg("report"), nb::arg("a"), nb::arg("b"), nb::arg("metric"),
        "`precsim report compare --json`: variants a and b of a train report, paired by seed.");
  m.def("summarize_report", &summary_tree, nb::arg("report"), nb::arg("rows"),
        "`precsim report summary --full`: the header, configuration, seeds and results as a tree.");
}

}  // namespace precsim::py

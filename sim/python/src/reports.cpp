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
nb::object train(nb::handle config, bool deterministic, std::optional<std::string> out) {
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
  nb::object report = py_from_json(doc);
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

nb::object check(nb::handle baseline, nb::handle run, nb::handle rules, std::optional<double> rtol,
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

std::vector<std::string> validate(nb::handle report) {
  const nlohmann::json doc = document_of(report, "report");
  nb::gil_scoped_release release;
  check_envelope(doc, "report");
  return validate_report(doc);
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
  m.def("validate_report", &validate, nb::arg("report"), "Every problem found; a str is the path of a report file.");
  m.def("check_report", &check, nb::arg("baseline"), nb::arg("run"), nb::arg("rules").none(), nb::arg("rtol").none(),
        nb::arg("atol").none(), "`precsim report check`; a str is the path of a report (or rules) file.");
}

}  // namespace precsim::py

// Training runs and reports: train(config) gives the same document as `precsim train --json`;
// load, validate and check are `precsim report`'s. JSON crosses to Python as text.
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
#include "precsim/sim/train/recipe.h"
#include "py_common.h"

namespace precsim::py {
namespace {

nlohmann::json parse_text(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(what + ": not valid JSON: " + e.what());
  }
}

std::string train(const std::string& config_text, bool deterministic) {
  TrainConfig c;
  try {
    c = train_config_from_json(parse_text(config_text, "config"));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("config: ") + e.what());
  }
  Report r("train");
  r.config() = train_config_to_json(c);
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  r.seeds() = {{"seed", c.seed}, {"seeds", seeds}};
  {
    nb::gil_scoped_release release;
    r.results() = run_training(c);
  }
  return r.document(deterministic).dump();
}

std::string check(const std::string& baseline, const std::string& run, std::optional<std::string> rules,
                  std::optional<double> rtol, std::optional<double> atol) {
  const nlohmann::json base = parse_text(baseline, "baseline"), doc = parse_text(run, "run");
  check_envelope(base, "baseline");
  check_envelope(doc, "run");
  const CheckRules r = rules ? parse_check_rules(parse_text(*rules, "rules")) : CheckRules{};
  std::optional<CheckRule> tol;
  if (rtol || atol) tol = tolerance_rule(rtol.value_or(0.0), atol.value_or(0.0));
  const CheckOutcome o = check_report(base, doc, r, tol);
  nlohmann::json out = {{"passed", o.passed()}, {"compared", o.compared}, {"failures", nlohmann::json::array()}};
  for (const auto& f : o.failures) out["failures"].push_back({{"path", f.path}, {"message", f.message}});
  return out.dump();
}

}  // namespace

void bind_reports(nb::module_& m) {
  nb::exception<ReportError>(m, "ReportError", PyExc_ValueError);
  nb::exception<CheckRefused>(m, "CheckRefused", PyExc_ValueError);
  m.def("train", &train, nb::arg("config"), nb::arg("deterministic"));
  // Documents may be large (per-step series): read, parsed and checked without the GIL.
  m.def("load_report", [](const std::string& path) { return load_report(path).dump(); }, nb::arg("path"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("validate_report", [](const std::string& text) {
    const nlohmann::json doc = parse_text(text, "report");
    check_envelope(doc, "report");
    return validate_report(doc);
  }, nb::arg("report"), nb::call_guard<nb::gil_scoped_release>());
  m.def("check_report", &check, nb::arg("baseline"), nb::arg("run"), nb::arg("rules").none(), nb::arg("rtol").none(),
        nb::arg("atol").none(), nb::call_guard<nb::gil_scoped_release>());
  m.def("recipe_presets", &recipe_preset_names);
}

}  // namespace precsim::py

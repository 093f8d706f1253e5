// precsim formats: the table of every preset format and its properties.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command_tables.h"
#include "precsim/formats/format.h"
#include "precsim/reports/report.h"

namespace precsim::cli {
namespace {

nlohmann::json format_json(const FormatPreset& p) {
  const Format& f = p.format;
  return {{"name", f.name},
          {"aliases", p.aliases},
          {"bits", f.bits()},
          {"exponent_bits", f.exp_bits},
          {"mantissa_bits", f.man_bits},
          {"bias", f.bias},
          {"kind", f.kind == FormatKind::kInt ? "int" : "float"},
          {"nonfinite", to_string(f.nonfinite)},
          {"signed", f.is_signed},
          {"has_zero", f.has_zero},
          {"subnormals", f.subnormals},
          {"emin", f.emin()},
          {"emax", f.emax()},
          {"max_finite", json_number(f.max_finite())},
          {"min_normal", json_number(f.min_normal())},
          {"min_subnormal", json_number(f.min_subnormal())},
          {"epsilon", json_number(f.epsilon())},
          {"finite_values", f.finite_count()},
          {"range_binades", f.range_binades()}};
}

void run(const OutputOptions& out) {
  check_output(out);
  Report r("formats");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : format_presets()) rows.push_back(format_json(p));
  r.results()["formats"] = rows;
  if (!out.json) std::cout << formats_table(r.results());
  finish_report(r, out);
}

const Registrar reg(10, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("formats", "list every preset number format and its properties");
  auto out = std::make_shared<OutputOptions>();
  add_output_options(cmd, *out);
  cmd->callback([out] { run(*out); });
});

}  // namespace
}  // namespace precsim::cli

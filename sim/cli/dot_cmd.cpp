// precsim dot: one dot product c + sum a_i b_i through an accumulation model, against the exact
// sum. The tool for reproducing published Tensor Core probes.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "accum_model_arg.h"
#include "cli_common.h"
#include "cli_parse.h"
#include "command_tables.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/analysis/dot_error.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string model;
  std::vector<std::string> a, b;
  std::string c = "0";
  std::string input_format, a_format, b_format, output_format;
  OutputOptions out;
};

// Values given as text, each a value of f that a float holds.
std::vector<float> parse_values(const char* option, const std::vector<std::string>& text, const Format& f) {
  std::vector<float> v;
  for (size_t i = 0; i < text.size(); ++i) {
    const double x = or_usage_error(fmt::format("{} element {}", option, i), [&] { return parse_real(text[i]); });
    const double q = round_to(f, x);
    // NaN is a value of every format that has one (q is NaN too), and a float.
    const bool nan = std::isnan(q) && std::isnan(x);
    if (!(q == x || nan) || (!nan && static_cast<double>(static_cast<float>(x)) != x))
      throw UsageError(fmt::format("{} element {} '{}' is not a value of {} (nearest: {})", option, i, text[i], f.name,
                                   hex_float(q)));
    v.push_back(static_cast<float>(x));
  }
  return v;
}

void run(const Args& args) {
  const AccumModel model = accum_model_arg("--model", args.model, args.output_format);
  if (model.kind == AccumKind::kUnordered)
    throw UsageError("--model unordered has no defined summation order; dot needs an ordered model");
  // An instruction takes its own operand types; other block models default to fp16.
  const size_t plus = model.operands.find('+');
  const std::string in_name = !args.input_format.empty()           ? args.input_format
                              : plus != std::string::npos          ? model.operands.substr(0, plus)
                              : model.kind == AccumKind::kBlockFma ? "fp16"
                                                                   : "fp32";
  const std::string b_default =
      args.input_format.empty() && plus != std::string::npos ? model.operands.substr(plus + 1) : in_name;
  const Format in = parse_format_arg("--a-format", args.a_format.empty() ? in_name : args.a_format);
  const Format bin = parse_format_arg("--b-format", args.b_format.empty() ? b_default : args.b_format);
  check_output(args.out);
  if (args.a.size() != args.b.size())
    throw UsageError(fmt::format("--a has {} values but --b has {}; a dot product needs equal lengths", args.a.size(),
                                 args.b.size()));
  const std::vector<float> a = parse_values("--a", args.a, in), b = parse_values("--b", args.b, bin);
  const double c = or_usage_error("--c", [&] { return parse_real(args.c); });
  if (!(round_to(model.acc, c) == c || std::isnan(c)))
    throw UsageError(fmt::format("--c '{}' is not a value of the accumulator format {} (nearest: {})", args.c,
                                 model.acc.name, hex_float(round_to(model.acc, c))));

  DotError d;
  try {
    d = dot_error(model, a, b, c, in, bin);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  Report r("dot");
  nlohmann::json av = nlohmann::json::array(), bv = nlohmann::json::array();
  for (size_t i = 0; i < a.size(); ++i) {
    av.push_back(hex_float(a[i]));
    bv.push_back(hex_float(b[i]));
  }
  r.config() = {{"model", to_json(model)}, {"input_format", format_to_json(in)},
                {"accumulator_format", format_to_json(model.acc)}, {"a", av}, {"b", bv}, {"c", hex_float(c)}};
  if (!(bin == in)) r.config()["b_format"] = format_to_json(bin);
  r.seeds() = nlohmann::json::object();
  r.results() = {{"result", json_number(d.result)},
                 {"result_hex", hex_float(d.result)},
                 {"exact", json_number(d.exact)},
                 {"exact_hex", hex_float(d.exact)},
                 {"exact_fits_fp64", d.exact_fits_fp64},
                 {"exact_rounded_to_accumulator", json_number(d.exact_in_acc)},
                 {"abs_error", json_number(d.abs_error)},
                 {"rel_error", json_number(d.rel_error)},
                 {"ulp_error", d.ulp_error},
                 {"status", status_to_string(d.status)}};
  if (!args.out.json) std::cout << dot_table(r.config(), r.results());
  finish_report(r, args.out);
}

const Registrar reg(40, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("dot", "one dot product c + sum a_i*b_i through an accumulation model, against the exact sum");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model, "preset (" + known_accum_model_names() + ") or a spec: " + kAccumSpecHelp)
      ->required();
  cmd->add_option("--a", a->a, "a0,a1,... in decimal or C99 hex-float (0x1.8p-24)")->required()->delimiter(',');
  cmd->add_option("--b", a->b, "b0,b1,...")->required()->delimiter(',');
  cmd->add_option("--c", a->c, "the accumulator's initial value, a value of the accumulator format (default 0)");
  cmd->add_option("--input-format", a->input_format,
                  "format of a and b (default: an instruction's own types, fp16 for other block models, else fp32)");
  cmd->add_option("--a-format", a->a_format, "format of a (default --input-format)");
  cmd->add_option("--b-format", a->b_format, "format of b (default --input-format): mixed operands, e.g. e4m3 x e5m2");
  cmd->add_option("--output-format", a->output_format, "accumulator (output) format: fp16 on a Tensor Core preset picks its FP16-output "
                  "variant (<preset>-f16acc); other formats add :acc=F to the spec");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

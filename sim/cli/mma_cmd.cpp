// precsim mma: one matrix instruction by name, D = A B + C with C its accumulator input, on .npy
// operands, against the exact A B + C rounded once to D's format.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "cli_common.h"
#include "cli_parse.h"
#include "command_tables.h"
#include "npy_matrix_arg.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/accum/mma.h"
#include "precsim/sim/analysis/tensor_report.h"
#include "precsim/sim/data/npy_floats.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string model, a, b, c, a_scales, b_scales, a_format, b_format, output_format, output;
  OutputOptions out;
};

struct Matrix {
  std::vector<float> values;
  int64_t rows = 0, cols = 0;
  MmaMatrix view() const { return {values, rows, cols}; }
};

Matrix read_matrix(const char* option, const std::string& path) {
  if (path.empty()) return {};
  FloatTensor t = read_matrix_file(option, path, [](const std::string& p) { return read_npy_floats(p); });
  return {std::move(t.values), int64_t(t.shape[0]), int64_t(t.shape[1])};
}

std::optional<Format> format_opt(const char* option, const std::string& name) {
  if (name.empty()) return std::nullopt;
  return parse_format_arg(option, name);
}

// D against the exact A B + C rounded once (nearest-even) into D's format.
nlohmann::json compare_exact(const MmaInstruction& ins, const Matrix& a, const Matrix& b, const Matrix& c,
                             const std::vector<double>& d) {
  uint64_t nans = 0, infs = 0, exact = 0;
  int64_t max_ulp = 0;
  std::vector<float> col(static_cast<size_t>(ins.k));
  for (int64_t i = 0; i < ins.m; ++i) {
    for (int64_t j = 0; j < ins.n; ++j) {
      for (int64_t p = 0; p < ins.k; ++p) col[p] = b.values[p * ins.n + j];
      const double v = d[i * ins.n + j];
      const Rounded e = exact_dot(std::span(a.values).subspan(i * ins.k, ins.k), col, c.values[i * ins.n + j], ins.d);
      const double ev = decode(ins.d, e.code);
      nans += std::isnan(v);
      infs += std::isinf(v);
      exact += v == ev || (std::isnan(v) && std::isnan(ev));
      if (std::isfinite(v) && std::isfinite(ev))
        max_ulp = std::max(max_ulp, std::abs(ordinal(ins.d, encode(ins.d, v).code) - ordinal(ins.d, e.code)));
    }
  }
  return {{"outputs", ins.m * ins.n}, {"nan_outputs", nans}, {"inf_outputs", infs},
          {"correctly_rounded_outputs", exact}, {"max_ulp_error", max_ulp}};
}

// D as float32, or float64 for an FP64 D.
void write_d(const std::string& path, const MmaInstruction& ins, const std::vector<double>& d) {
  const std::vector<size_t> shape = {static_cast<size_t>(ins.m), static_cast<size_t>(ins.n)};
  if (ins.d.bits() > 32) {
    write_npy(path, "<f8", shape, d.data(), d.size() * sizeof(double));
  } else {
    const std::vector<float> f(d.begin(), d.end());
    write_npy(path, "<f4", shape, f.data(), f.size() * sizeof(float));
  }
  note() << "wrote " << path << "\n";
}

void run(const Args& args) {
  check_output(args.out);
  try {
    parse_accum_model(args.model);  // a bad name is refused before any file is read
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--model: ") + e.what());
  }
  const Matrix a = read_matrix("--a", args.a), b = read_matrix("--b", args.b);
  Matrix c = read_matrix("--c", args.c);
  if (args.c.empty()) c = {std::vector<float>(static_cast<size_t>(a.rows * b.cols), 0.0f), a.rows, b.cols};
  const Matrix sa = read_matrix("--a-scales", args.a_scales), sb = read_matrix("--b-scales", args.b_scales);
  MmaInstruction ins;
  std::vector<double> d;
  try {
    ins = resolve_mma(args.model, format_opt("--a-format", args.a_format), format_opt("--b-format", args.b_format),
                      format_opt("--output-format", args.output_format), c.rows, c.cols, a.cols);
    d = mma(ins, {a.view(), b.view(), c.view(), sa.view(), sb.view()});
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  Report r("mma");
  r.config() = {{"model", to_json(ins.model)},
                {"instruction", ins.name},
                {"shape", {{"m", ins.m}, {"n", ins.n}, {"k", ins.k}}},
                {"formats",
                 {{"a", format_to_json(ins.a)}, {"b", format_to_json(ins.b)}, {"c", format_to_json(ins.c)},
                  {"d", format_to_json(ins.d)}}},
                {"operands", {{"a", args.a}, {"b", args.b}, {"c", args.c.empty() ? "zeros" : args.c}}}};
  if (ins.scale)
    r.config()["operands"].update({{"a_scales", args.a_scales}, {"b_scales", args.b_scales},
                                   {"scale_format", format_to_json(*ins.scale)}, {"scale_block", ins.scale_block}});
  r.seeds() = nlohmann::json::object();
  r.results() = compare_exact(ins, a, b, c, d);
  if (!args.output.empty()) write_d(args.output, ins, d);
  if (!args.out.json) std::cout << mma_table(r.config(), r.results());
  finish_report(r, args.out);
}

const Registrar reg(41, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("mma", "one matrix instruction D = A B + C by name (MMA-Sim's), on .npy operands, "
                                        "against the exact A B + C");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model,
                  "ARCH/INSTRUCTION (`precsim models` lists them) or a GPU preset that picks its instruction by "
                  "--a-format and --b-format")
      ->required();
  cmd->add_option("--a", a->a, "A as a 2-D .npy (M x K), values of the instruction's A type")->required();
  cmd->add_option("--b", a->b, "B as a 2-D .npy (K x N)")->required();
  cmd->add_option("--c", a->c, "C, the accumulator input, as a 2-D .npy (M x N; default zeros)");
  cmd->add_option("--a-scales", a->a_scales, "block-scaled instructions: A's decode scales (M x K/block)");
  cmd->add_option("--b-scales", a->b_scales, "block-scaled instructions: B's decode scales (N x K/block)");
  cmd->add_option("--a-format", a->a_format, "format of A (default: the instruction's)");
  cmd->add_option("--b-format", a->b_format, "format of B (default: the instruction's)");
  cmd->add_option("--output-format", a->output_format, "format of D (default: the instruction's)");
  cmd->add_option("--output", a->output, ".npy file for D (float32; float64 for an FP64 D)");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

// precsim gemm: error of emulated matrix products against the exact product, for one or several
// accumulation models side by side, on generated or .npy operands; --sweep-k gives error vs K.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <span>
#include <tuple>
#include <nlohmann/json.hpp>

#include "accum_model_arg.h"
#include "cli_common.h"
#include "npy_matrix_arg.h"
#include "cli_parse.h"
#include "command_tables.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/analysis/gemm_error.h"
#include "precsim/sim/analysis/gemm_models.h"
#include "precsim/sim/data/gemm_operands.h"
#include "precsim/sim/data/npy_floats.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  int64_t m = 256, n = 256, k = 1024;
  std::string a_format = "bf16", b_format = "bf16", out_format = "fp32", output_format;
  std::vector<std::string> models = {"fp32-seq"};
  std::string dist = "normal";
  std::string a_npy, b_npy, output;
  std::vector<int64_t> sweep_k;
  uint64_t seed = 0;
  int64_t sample = 4096;
  int threads = 0;
  OutputOptions out;
};

NpyArray read_matrix(const char* option, const std::string& path) {
  NpyArray x = read_matrix_file(option, path, [](const std::string& p) { return read_npy(p); });
  if (x.descr != "<f4" && x.descr != "<f8" && x.descr != "<f2")
    throw UsageError(fmt::format("{} '{}': dtype {} is not supported; allowed: float16 (<f2), float32 (<f4), float64 (<f8)",
                                 option, path, x.descr));
  to_c_order(x);
  return x;
}

uint64_t count_nonfinite(const std::vector<float>& v) {
  uint64_t n = 0;
  for (const float x : v) n += !std::isfinite(x);
  return n;
}

// C as the model computed it: float32 when the output format fits a float, else float64.
void write_product(const std::string& path, const Format& of, int64_t m, int64_t n, std::span<const double> c) {
  const std::vector<size_t> shape = {static_cast<size_t>(m), static_cast<size_t>(n)};
  if (of.bits() <= 32 && of.man_bits <= 23 && of.emax() <= 127) {
    const std::vector<float> f(c.begin(), c.end());
    write_npy(path, "<f4", shape, f.data(), f.size() * sizeof(float));
  } else {
    write_npy(path, "<f8", shape, c.data(), c.size() * sizeof(double));
  }
  note() << "wrote " << path << "\n";
}

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

// What the options resolve to, checked before any long work.
struct Plan {
  std::vector<AccumModel> models;
  Format af, bf, of;
  int64_t m = 0, n = 0;
  std::vector<int64_t> ks;
  bool from_npy = false;
  NpyArray an, bn;
};

void read_npy_operands(const Args& args, Plan& p) {
  p.an = read_matrix("--a", args.a_npy);
  p.bn = read_matrix("--b", args.b_npy);
  if (p.an.shape[1] != p.bn.shape[0])
    throw UsageError(fmt::format("--a has shape ({}, {}) and --b ({}, {}): A's columns must equal B's rows (K)",
                                 p.an.shape[0], p.an.shape[1], p.bn.shape[0], p.bn.shape[1]));
  p.m = static_cast<int64_t>(p.an.shape[0]);
  p.n = static_cast<int64_t>(p.bn.shape[1]);
  p.ks = {static_cast<int64_t>(p.an.shape[1])};
}

// Refuse before allocating: operands, one output per model, the exact sample.
void check_memory(const Plan& p) {
  const int64_t kmax = *std::max_element(p.ks.begin(), p.ks.end());
  const long double need = static_cast<long double>(gemm_bytes_estimate(p.m, p.n, kmax)) +
                           8.0L * static_cast<long double>(p.m) * p.n * static_cast<long double>(p.models.size());
  const uint64_t mem = physical_memory();
  if (mem > 0 && need > 0.8L * mem)
    throw UsageError(fmt::format("shape {} x {} x {} with {} model(s) needs about {:.1f} GiB; this machine has {:.1f} GiB",
                                 p.m, p.n, kmax, p.models.size(), static_cast<double>(need / (1ull << 30)),
                                 static_cast<double>(mem) / (1ull << 30)));
}

Plan plan(const Args& args) {
  Plan p;
  for (const auto& spec : args.models) p.models.push_back(accum_model_arg("--model", spec, args.output_format));
  p.af = parse_format_arg("--a-format", args.a_format);
  p.bf = parse_format_arg("--b-format", args.b_format);
  p.of = parse_format_arg("--c-format", args.out_format);
  if (args.sample < 1) throw UsageError(fmt::format("--sample {} must be at least 1", args.sample));
  for (const Format* f : {&p.af, &p.bf}) {
    if (f->bits() > 32 || f->man_bits > 23 || f->emax() > 127)
      throw UsageError(fmt::format("operand format '{}' must fit in float32 (operands are float arrays)", f->name));
  }
  p.from_npy = !args.a_npy.empty() || !args.b_npy.empty();
  if (p.from_npy && (args.a_npy.empty() || args.b_npy.empty()))
    throw UsageError("--a and --b go together: give both .npy files or neither");
  if (p.from_npy && !args.sweep_k.empty()) throw UsageError("--sweep-k needs generated operands, not --a/--b files");
  check_output(args.out);
  if (!args.output.empty()) {
    if (p.models.size() != 1)
      throw UsageError(fmt::format("--output holds one product: give one --model, not {}", p.models.size()));
    if (args.sweep_k.size() > 1) throw UsageError("--output holds one product: give one K, not --sweep-k");
    check_destination("--output", args.output);
  }
  p.m = args.m;
  p.n = args.n;
  p.ks = args.sweep_k.empty() ? std::vector<int64_t>{args.k} : args.sweep_k;
  if (p.from_npy) read_npy_operands(args, p);
  if (p.m < 1 || p.n < 1) throw UsageError(fmt::format("--m {} and --n {} must be at least 1", p.m, p.n));
  for (const int64_t k : p.ks)
    if (k < 1) throw UsageError(fmt::format("K = {} must be at least 1", k));
  check_memory(p);
  return p;
}

nlohmann::json config_json(const Args& args, const Plan& p) {
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& mo : p.models) mj.push_back(to_json(mo));
  return {{"m", p.m}, {"n", p.n}, {"k", p.ks}, {"a_format", format_to_json(p.af)}, {"b_format", format_to_json(p.bf)},
          {"out_format", format_to_json(p.of)}, {"models", mj}, {"sample", args.sample},
          {"operands", p.from_npy ? nlohmann::json{{"a", args.a_npy}, {"b", args.b_npy}, {"rounding", "nearest-even"}}
                                  : nlohmann::json{{"dist", args.dist}, {"rounding", "nearest-even"}}},
          {"epilogue", {{"alpha", 1.0}, {"beta", 0.0}}}, {"output", args.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.output)}};
}

// One K of the sweep: every model, each reported as it finishes; false once Ctrl-C stopped it.
bool run_k(const Args& args, const Plan& p, int64_t k, const InterruptGuard& guard, size_t& finished,
           nlohmann::json& sweep) {
  std::vector<float> a, b;
  if (p.from_npy) {
    a = npy_to_floats(p.an, args.a_npy);
    b = npy_to_floats(p.bn, args.b_npy);
  } else {
    or_usage_error("--dist", [&] {
      generate_gemm_operand(args.dist, false, p.m, k, args.seed, a);
      generate_gemm_operand(args.dist, true, k, p.n, args.seed, b);
    });
  }
  const uint64_t bad_a = count_nonfinite(a), bad_b = count_nonfinite(b);
  for (const auto& [name, bad, size] : {std::tuple{"A", bad_a, a.size()}, std::tuple{"B", bad_b, b.size()}})
    if (bad) std::cerr << fmt::format("warning: {}: {} of {} elements are NaN or Inf\n", name, bad, size);
  GemmArgs g;
  g.m = p.m, g.n = p.n, g.k = k, g.a_format = p.af, g.b_format = p.bf, g.out_format = p.of, g.threads = args.threads;
  nlohmann::json per_model = nlohmann::json::array();
  GemmModelsHooks hooks;
  hooks.on_sample = [&](size_t sampled) {
    note() << fmt::format("K={}: exact reference on {} of {} outputs\n", k, sampled, p.m * p.n);
  };
  hooks.on_model = [&](const ModelGemmError& r) {
    const AccumModel& mo = *r.model;
    const GemmErrorStats& e = r.error;
    note() << fmt::format("K={} {}: {:.3f} s, {:.3f} GMAC/s\n", k, mo.name, r.seconds,
                             static_cast<double>(p.m * p.n * k) / r.seconds * 1e-9);
    if (r.stats.nan_outputs + r.stats.inf_outputs)
      std::cerr << fmt::format("warning: K={} {}: {} NaN and {} Inf among the {} outputs; of the {} sampled outputs, {} "
                               "have a NaN or Inf exact value (left out of the errors) and {} are non-finite where the "
                               "exact value is finite\n",
                               k, mo.name, r.stats.nan_outputs, r.stats.inf_outputs, p.m * p.n, e.count,
                               e.exact_nonfinite, e.nonfinite);
    if (!args.output.empty()) write_product(args.output, p.of, p.m, p.n, r.c);
    per_model.push_back({{"model", mo.name},
                         {"reproducible", mo.reproducible()},
                         {"error", to_json(e)},
                         {"output_stats", quant_stats_to_json(r.stats.output)},
                         {"nan_outputs", r.stats.nan_outputs},
                         {"inf_outputs", r.stats.inf_outputs}});
    if (!args.out.json) std::cout << gemm_table_row(k, per_model.back());
    ++finished;
    return !guard.requested();
  };
  QuantStats qa, qb;
  try {
    compare_gemm_models(g, std::move(a), std::move(b), p.models, args.sample, args.seed, &qa, &qb, hooks);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  sweep.push_back({{"k", k},
                   {"operand_stats", {{"a", quant_stats_to_json(qa)}, {"b", quant_stats_to_json(qb)}}},
                   {"models", per_model}});
  // Only where there is something to count, so that reports of finite operands keep their digests.
  if (bad_a + bad_b) sweep.back()["nonfinite_inputs"] = {{"a", bad_a}, {"b", bad_b}};
  return !guard.requested();
}

void run(const Args& args) {
  const Plan p = plan(args);
  Report r("gemm");
  r.config() = config_json(args, p);
  r.seeds() = {{"operands", args.seed}, {"sample", args.seed}};
  nlohmann::json sweep = nlohmann::json::array();
  // Ctrl-C stops after the model in progress; the report holds every (K, model) that finished.
  const InterruptGuard guard;
  size_t finished = 0;
  if (!args.out.json) std::cout << gemm_table_header();
  for (const int64_t k : p.ks)
    if (!run_k(args, p, k, guard, finished, sweep)) break;
  r.results()["sweep"] = sweep;
  finish_report(r, args.out, guard, fmt::format("{} of {} (K, model) products", finished, p.ks.size() * p.models.size()));
}

const Registrar reg(41, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("gemm", "error of emulated matrix products against the exact product, models side by side");
  auto a = std::make_shared<Args>();
  cmd->add_option("--m", a->m, "rows of A and C")->capture_default_str();
  cmd->add_option("--n", a->n, "columns of B and C")->capture_default_str();
  cmd->add_option("--k", a->k, "inner dimension")->capture_default_str();
  cmd->add_option("--a-format", a->a_format, "format of A's values (operands are rounded to nearest-even into it)")->capture_default_str();
  cmd->add_option("--b-format", a->b_format, "format of B's values")->capture_default_str();
  cmd->add_option("--c-format", a->out_format, "format of C's values")->capture_default_str();
  // --out names the report in every command; C's format had this name before.
  cmd->add_option("--out-format", a->out_format, "the former name of --c-format")->group("");
  cmd->add_option("--output-format", a->output_format, "accumulator (output) format of every model: fp16 picks each "
                  "Tensor Core preset's FP16-output variant (<preset>-f16acc), as precsim dot does");
  cmd->add_option("--model", a->models,
                  "preset(s) or spec(s), comma-separated: " + known_accum_model_names() + "; a spec: " + kAccumSpecHelp)
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--dist", a->dist, kGemmOperandDists)->capture_default_str();
  cmd->add_option("--a", a->a_npy, "A as a 2-D float16/32/64 .npy (M x K, C or Fortran order), instead of generated operands");
  cmd->add_option("--b", a->b_npy, "B as a 2-D .npy (K x N)");
  cmd->add_option("--output", a->output,
                  ".npy file for C, the emulated product of one --model (float32, or float64 for a wider --c-format)");
  cmd->add_option("--sweep-k", a->sweep_k, "K values, comma-separated: error against K")->delimiter(',');
  cmd->add_option("--seed", a->seed, seed_help("the generated operands and the outputs sampled"))->capture_default_str();
  cmd->add_option("--sample", a->sample, "outputs compared with the exact product (all when M*N is smaller)")->capture_default_str();
  add_threads_option(cmd, a->threads);
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

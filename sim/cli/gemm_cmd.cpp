// precsim gemm: error of emulated matrix products against the exact product, for one or several
// accumulation models side by side, on generated or .npy operands; --sweep-k gives error vs K.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/data/distributions.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/analysis/gemm_error.h"
#include "precsim/sim/core/random.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  int64_t m = 256, n = 256, k = 1024;
  std::string a_format = "bf16", b_format = "bf16", out_format = "fp32";
  std::vector<std::string> models = {"fp32-seq"};
  std::string dist = "normal";
  std::string a_npy, b_npy;
  std::vector<int64_t> sweep_k;
  uint64_t seed = 0;
  int64_t sample = 4096;
  int threads = 0;
  OutputOptions out;
};

constexpr const char* kDistHelp =
    "normal: N(0,1); wide: N(0,1) * 2^u with u uniform on the integers -10..10 (wide exponent spread); "
    "cancel: A = [X X], B = [Y; -Y + 2^-8 Z] (sums of large terms that nearly cancel); or any "
    "distribution spec of precsim::parse_distribution (uniform:low=0,high=1, student-t:df=3, ...)";

// Operands of shape rows x cols, row-major, generated from (seed, stream).
void generate_operand(const std::string& dist, bool is_b, int64_t rows, int64_t cols, uint64_t seed,
                      std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  const uint64_t stream = is_b ? 2 : 1;
  if (dist == "normal") {
    fill_normal(out, seed, stream);
  } else if (dist == "wide") {
    for (size_t i = 0; i < out.size(); ++i) {
      const int e = static_cast<int>(std::floor(uniform01(seed, stream + 10, i) * 21)) - 10;
      out[i] = static_cast<float>(std::ldexp(standard_normal(seed, stream, i), e));
    }
  } else if (dist == "cancel") {
    // The second half of K repeats A's first half and negates B's, plus a small perturbation.
    const int64_t half = is_b ? rows / 2 : cols / 2;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t p = is_b ? r : c;  // the K index
        const int64_t q = p < half ? p : p - half;
        const int64_t src = is_b ? q * cols + c : r * cols + q;
        double v = standard_normal(seed, stream, static_cast<uint64_t>(src));
        if (is_b && p >= half && p - half < half) v = -v + std::ldexp(standard_normal(seed, 7, src), -8);
        out[r * cols + c] = static_cast<float>(v);
      }
    }
  } else {
    Distribution d;
    try {
      d = parse_distribution(dist);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--dist: {}; allowed: {}", e.what(), kDistHelp));
    }
    generate(d, out, seed ^ (is_b ? 0x9e3779b97f4a7c15ULL : 0));
  }
}

NpyArray read_matrix(const char* option, const std::string& path) {
  NpyArray x;
  try {
    x = read_npy(path);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("{}: {}", option, e.what()));
  }
  if (x.shape.size() != 2)
    throw UsageError(fmt::format("{} '{}': a matrix needs 2 dimensions, the file has {}", option, path, x.shape.size()));
  if (x.fortran_order) throw UsageError(fmt::format("{} '{}': Fortran-order arrays are not supported", option, path));
  if (x.descr != "<f4" && x.descr != "<f8")
    throw UsageError(fmt::format("{} '{}': dtype {} is not supported; expected float32 (<f4) or float64 (<f8)", option,
                                 path, x.descr));
  return x;
}

std::vector<float> npy_floats(const NpyArray& x) {
  const size_t n = x.count();
  std::vector<float> v(n);
  if (x.descr == "<f4") v.assign(x.as<float>(), x.as<float>() + n);
  else for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(x.as<double>()[i]);
  return v;
}

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

void run(const Args& args) {
  std::vector<AccumModel> models;
  for (const auto& spec : args.models) {
    models.push_back(or_usage_error("--model", [&] { return parse_accum_model(spec); }));
  }
  const Format af = parse_format_arg("--a-format", args.a_format);
  const Format bf = parse_format_arg("--b-format", args.b_format);
  const Format of = parse_format_arg("--out-format", args.out_format);
  if (args.sample < 1) throw UsageError(fmt::format("--sample {} must be at least 1", args.sample));
  for (const Format* f : {&af, &bf}) {
    if (f->bits() > 32 || f->man_bits > 23 || f->emax() > 127)
      throw UsageError(fmt::format("operand format '{}' must fit in float32 (operands are float arrays)", f->name));
  }
  const bool from_npy = !args.a_npy.empty() || !args.b_npy.empty();
  if (from_npy && (args.a_npy.empty() || args.b_npy.empty()))
    throw UsageError("--a and --b go together: give both .npy files or neither");
  if (from_npy && !args.sweep_k.empty()) throw UsageError("--sweep-k needs generated operands, not --a/--b files");
  check_output(args.out);

  int64_t m = args.m, n = args.n;
  std::vector<int64_t> ks = args.sweep_k.empty() ? std::vector<int64_t>{args.k} : args.sweep_k;
  NpyArray an, bn;
  if (from_npy) {
    an = read_matrix("--a", args.a_npy);
    bn = read_matrix("--b", args.b_npy);
    if (an.shape[1] != bn.shape[0])
      throw UsageError(fmt::format("--a has shape ({}, {}) and --b ({}, {}): A's columns must equal B's rows (K)",
                                   an.shape[0], an.shape[1], bn.shape[0], bn.shape[1]));
    m = static_cast<int64_t>(an.shape[0]);
    n = static_cast<int64_t>(bn.shape[1]);
    ks = {static_cast<int64_t>(an.shape[1])};
  }
  if (m < 1 || n < 1) throw UsageError(fmt::format("--m {} and --n {} must be at least 1", m, n));
  for (const int64_t k : ks)
    if (k < 1) throw UsageError(fmt::format("K = {} must be at least 1", k));
  // Refuse before allocating: operands, one output per model, the exact sample.
  const int64_t kmax = *std::max_element(ks.begin(), ks.end());
  const long double need = static_cast<long double>(gemm_bytes_estimate(m, n, kmax)) +
                           8.0L * static_cast<long double>(m) * n * static_cast<long double>(models.size());
  const uint64_t mem = physical_memory();
  if (mem > 0 && need > 0.8L * mem)
    throw UsageError(fmt::format("shape {} x {} x {} with {} model(s) needs about {:.1f} GiB; this machine has {:.1f} GiB",
                                 m, n, kmax, models.size(), static_cast<double>(need / (1ull << 30)),
                                 static_cast<double>(mem) / (1ull << 30)));

  Report r("gemm");
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& mo : models) mj.push_back(to_json(mo));
  r.config() = {{"m", m}, {"n", n}, {"k", ks}, {"a_format", format_to_json(af)}, {"b_format", format_to_json(bf)},
                {"out_format", format_to_json(of)}, {"models", mj}, {"sample", args.sample},
                {"operands", from_npy ? nlohmann::json{{"a", args.a_npy}, {"b", args.b_npy}, {"rounding", "nearest-even"}}
                                      : nlohmann::json{{"dist", args.dist}, {"rounding", "nearest-even"}}},
                {"epilogue", {{"alpha", 1.0}, {"beta", 0.0}}}};
  r.seeds() = {{"operands", args.seed}, {"sample", args.seed}};
  nlohmann::json sweep = nlohmann::json::array();
  // Ctrl-C stops after the model in progress; the report holds every (K, model) that finished.
  const InterruptGuard guard;
  size_t finished = 0;
  if (!args.out.json)
    std::cout << fmt::format("{:>7} {:<22} {:>11} {:>11} {:>11} {:>9} {:>9}\n", "K", "model", "max rel", "mean rel",
                             "normwise", "max ulp", "mean ulp");
  for (const int64_t k : ks) {
    std::vector<float> a, b;
    if (from_npy) {
      a = npy_floats(an);
      b = npy_floats(bn);
    } else {
      generate_operand(args.dist, false, m, k, args.seed, a);
      generate_operand(args.dist, true, k, n, args.seed, b);
    }
    // TF32 operands stay FP32 so that each model applies its own TF32 input rounding.
    const bool a_tf32 = af.name == "tf32", b_tf32 = bf.name == "tf32";
    QuantStats qa, qb;
    if (!a_tf32) quantize(af, a, a, {}, &qa);
    if (!b_tf32) quantize(bf, b, b, {}, &qb);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a_format = af, g.b_format = bf, g.out_format = of, g.threads = args.threads;
    g.input_policy = a_tf32 || b_tf32 ? InputPolicy::kRound : InputPolicy::kTrust;
    const auto index = sample_outputs(m, n, args.sample, args.seed);
    std::cerr << fmt::format("K={}: exact reference on {} of {} outputs\n", k, index.size(), m * n);
    // The exact reference of TF32 operands depends on the model's input rounding: computed per model.
    ExactSample ex;
    if (!a_tf32 && !b_tf32) ex = exact_gemm_sample(g, a.data(), b.data(), index, of);
    nlohmann::json per_model = nlohmann::json::array();
    for (const auto& mo : models) {
      std::vector<double> c(static_cast<size_t>(m * n));
      const auto t0 = std::chrono::steady_clock::now();
      const GemmStats st = or_usage_error("model " + mo.name, [&] { return gemm(mo, g, a.data(), b.data(), c.data()); });
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (a_tf32 || b_tf32) {
        std::vector<float> ra = a, rb = b;
        QuantOptions o;
        o.rounding = mo.tf32_rounding;
        quantize(af, ra, ra, a_tf32 ? o : QuantOptions{});
        quantize(bf, rb, rb, b_tf32 ? o : QuantOptions{});
        ex = exact_gemm_sample(g, ra.data(), rb.data(), index, of);
      }
      const GemmErrorStats e = measure_error(ex, c.data(), of);
      std::cerr << fmt::format("K={} {}: {:.3f} s, {:.3f} GMAC/s\n", k, mo.name, secs,
                               static_cast<double>(m * n * k) / secs * 1e-9);
      per_model.push_back({{"model", mo.name},
                           {"reproducible", mo.reproducible()},
                           {"error", to_json(e)},
                           {"output_stats", quant_stats_to_json(st.output)},
                           {"nan_outputs", st.nan_outputs},
                           {"inf_outputs", st.inf_outputs}});
      if (!args.out.json)
        std::cout << fmt::format("{:>7} {:<22} {:>11.4e} {:>11.4e} {:>11.4e} {:>9} {:>9.3f}\n", k, mo.name, e.max_rel,
                                 e.mean_rel, e.normwise, e.max_ulp, e.mean_ulp);
      ++finished;
      if (guard.requested()) break;
    }
    sweep.push_back({{"k", k},
                     {"operand_stats", {{"a", quant_stats_to_json(qa)}, {"b", quant_stats_to_json(qb)}}},
                     {"models", per_model}});
    if (guard.requested()) break;
  }
  r.results()["sweep"] = sweep;
  finish_report(r, args.out, guard, fmt::format("{} of {} (K, model) products", finished, ks.size() * models.size()));
}

const Registrar reg(41, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("gemm", "error of emulated matrix products against the exact product, models side by side");
  auto a = std::make_shared<Args>();
  cmd->add_option("--m", a->m, "rows of A and C")->capture_default_str();
  cmd->add_option("--n", a->n, "columns of B and C")->capture_default_str();
  cmd->add_option("--k", a->k, "inner dimension")->capture_default_str();
  cmd->add_option("--a-format", a->a_format, "format of A's values (operands are rounded to nearest-even into it)")->capture_default_str();
  cmd->add_option("--b-format", a->b_format, "format of B's values")->capture_default_str();
  cmd->add_option("--out-format", a->out_format, "format of C")->capture_default_str();
  cmd->add_option("--model", a->models, "preset(s) or spec(s), comma-separated: " + known_accum_model_names())
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--dist", a->dist, kDistHelp)->capture_default_str();
  cmd->add_option("--a", a->a_npy, "A as a 2-D float32/float64 .npy (M x K), instead of generated operands");
  cmd->add_option("--b", a->b_npy, "B as a 2-D .npy (K x N)");
  cmd->add_option("--sweep-k", a->sweep_k, "K values, comma-separated: error against K")->delimiter(',');
  cmd->add_option("--seed", a->seed, "seed of the generated operands and of the output sample")->capture_default_str();
  cmd->add_option("--sample", a->sample, "outputs compared with the exact product (all when M*N is smaller)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads (0: all); results do not depend on it");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

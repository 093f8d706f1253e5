// precsim allreduce: the all-reduce alone on generated gradients, error against the exact sum.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command_tables.h"
#include "cli_parse.h"
#include "precsim/sim/analysis/allreduce_error.h"
#include "precsim/sim/data/gemm_operands.h"
#include "precsim/sim/parallel/allreduce.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string workers = "8";
  size_t elements = 1 << 16;
  std::string formats = "bf16";
  std::string algorithms = "ring";
  std::string average = "sum";
  std::string hook = "none";
  double stddev = 1e-2;
  double mean = 0.0;
  uint64_t seed = 0;
  OutputOptions out;
};

int parse_workers(const std::string& s) {
  try {
    size_t used = 0;
    const int w = std::stoi(s, &used);
    if (used == s.size() && w >= 1 && w <= 4096) return w;
  } catch (const std::exception&) {
  }
  throw UsageError("--workers: '" + s + "' is not a worker count; allowed: integers 1..4096, comma-separated");
}

void run(const Args& a) {
  check_output(a.out);
  if (a.elements == 0) throw UsageError("--elements must be at least 1");
  std::vector<int> workers;
  for (const auto& w : split_list(a.workers)) workers.push_back(parse_workers(w));
  std::vector<Format> formats;
  for (const auto& f : split_list(a.formats)) formats.push_back(parse_format_arg("--format", f));
  std::vector<AllReduceAlgorithm> algos;
  for (const auto& s : split_list(a.algorithms)) algos.push_back(or_usage_error("--algorithm", [&] { return parse_allreduce_algorithm(s); }));
  const AverageMode avg = or_usage_error("--average", [&] { return parse_average_mode(a.average); });
  const CompressHook hook = or_usage_error("--hook", [&] { return parse_compress_hook(a.hook); });
  if (workers.empty() || formats.empty() || algos.empty()) throw UsageError("--workers, --format and --algorithm need at least one value");
  if (!(a.stddev > 0) || !std::isfinite(a.stddev)) throw UsageError("--std must be a positive number");
  const double mem = double(a.elements) * 4.0 * 4.0 * *std::max_element(workers.begin(), workers.end());
  if (mem > 8e9) throw UsageError(fmt::format("--elements {} x --workers needs about {:.1f} GB; the limit is 8 GB", a.elements, mem / 1e9));

  Report r("allreduce");
  r.config() = {{"workers", workers}, {"elements", a.elements}, {"formats", split_list(a.formats)},
                {"algorithms", split_list(a.algorithms)}, {"average", to_string(avg)}, {"hook", to_string(hook)},
                {"distribution", {{"name", "normal"}, {"mean", a.mean}, {"std", a.stddev}}}};
  r.seeds() = {{"data", a.seed}};
  nlohmann::json rows = nlohmann::json::array();
  // Ctrl-C stops after the configuration in progress; the report holds the rows that finished.
  const InterruptGuard guard;
  if (!a.out.json) std::cout << allreduce_table_header();
  for (int w : workers) {
    const std::vector<std::vector<float>> g = generate_worker_gradients(w, a.elements, a.seed, a.mean, a.stddev);
    // The exact average, per element, for every configuration of this worker count.
    const std::vector<double> exact = exact_reduction(g, avg == AverageMode::kSum ? 1.0 : w);
    std::vector<std::span<const float>> spans(g.begin(), g.end());
    for (const Format& f : formats) {
      for (AllReduceAlgorithm al : algos) {
        note() << fmt::format("all-reduce: {} workers, {}, {}\n", w, f.name, to_string(al));
        AllReduceConfig c{w, al, f, avg, hook};
        const AllReduceResult res = allreduce(spans, c);
        const ReductionError e = reduction_error(res.reduced, exact);
        rows.push_back({{"workers", w}, {"format", f.name}, {"algorithm", to_string(al)},
                        {"average", to_string(avg)}, {"hook", to_string(hook)},
                        {"rel_err_norm", json_number(e.rel_err_norm)}, {"rel_err_max", json_number(e.rel_err_max)},
                        {"mean_rel_bias", json_number(e.mean_rel_bias)},
                        {"ranks_identical", res.ranks_identical}, {"fp8_scale", json_number(res.scale)}});
        if (!a.out.json) std::cout << allreduce_table_row(rows.back());
        if (guard.requested()) break;
      }
      if (guard.requested()) break;
    }
    if (guard.requested()) break;
  }
  r.results()["runs"] = rows;
  finish_report(r, a.out, guard, fmt::format("{} of {} configurations", rows.size(),
                                             workers.size() * formats.size() * algos.size()));
}

const Registrar reg(60, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("allreduce", "simulate a data-parallel all-reduce on generated gradients");
  auto a = std::make_shared<Args>();
  cmd->add_option("--workers,-w", a->workers, "worker counts, comma-separated")->capture_default_str();
  cmd->add_option("--elements,-n", a->elements, "gradient elements per worker")->capture_default_str();
  cmd->add_option("--formats,-f", a->formats, "buffer formats, comma-separated (fp64, fp32, bf16, fp16, e4m3, e5m2)")->capture_default_str();
  cmd->add_option("--format", a->formats, "the former name of --formats")->group("");
  cmd->add_option("--algorithm,-a", a->algorithms, "ring|tree|naive|fp32-accumulate, comma-separated")->capture_default_str();
  cmd->add_option("--average", a->average, "sum|ddp|nccl-avg|post-divide|fsdp")->capture_default_str();
  cmd->add_option("--hook", a->hook, "DDP compression hook: none|bf16|fp16")->capture_default_str();
  cmd->add_option("--mean", a->mean, "gradient mean")->capture_default_str();
  cmd->add_option("--std", a->stddev, "gradient standard deviation")->capture_default_str();
  cmd->add_option("--seed", a->seed, seed_help("the generated gradients"))->capture_default_str();
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

// precsim analyze: what each format or block-scaling scheme does to a real or generated tensor.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/safetensors.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "precsim/sim/data/distributions.h"
#include "precsim/sim/data/npy_floats.h"
#include "quant_args.h"
#include "command_tables.h"
#include "scheme_report.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string input;
  std::vector<std::string> tensors;
  std::string dist;
  std::string outliers;
  uint64_t count = 1 << 20;
  std::vector<std::string> formats;
  QuantArgs quant;
  std::string sort = "qsnr";
  size_t worst = 0;
  OutputOptions out;
};

// One tensor's analysis, named as the report and the table name it.
struct Analyzed {
  std::string name, dtype;
  std::vector<size_t> shape;
  TensorAnalysis result;
};

nlohmann::json tensor_json(const Analyzed& t) {
  nlohmann::json j = tensor_analysis_json(t.result);
  j["name"] = t.name;
  j["dtype"] = t.dtype;
  j["shape"] = t.shape;
  return j;
}

bool is_safetensors(const std::string& path) {
  return path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
}

// The inputs and what came of them: the report's config.input and the tensors analysed.
struct Run {
  nlohmann::json input;
  std::vector<Analyzed> tensors;
  size_t chosen = 1;                    // tensors selected (a .safetensors run may stop early)
  std::optional<InterruptGuard> guard;  // only a .safetensors input has several units of work
};

void analyze_generated(const Args& a, const std::vector<BlockScaling>& schemes, Run& run) {
  const Distribution d = or_usage_error("--dist", [&] {
    Distribution dist = parse_distribution(a.dist);
    if (!a.outliers.empty()) parse_outliers(a.outliers, dist);
    return dist;
  });
  if (a.count == 0) throw UsageError("--count 0: the tensor would be empty; give N >= 1");
  // Generated tensors are rows of 4096 (or one row when shorter), so row and column blocks
  // both exist.
  const size_t cols = std::min<uint64_t>(a.count, 4096);
  const std::vector<size_t> shape = a.count % cols == 0 && a.count > cols ? std::vector<size_t>{a.count / cols, cols}
                                                                          : std::vector<size_t>{a.count};
  std::vector<float> values(a.count);
  generate(d, values, a.quant.seed);
  run.input = {{"dist", std::string(to_string(d.kind))},
               {"params", d.params},
               {"outlier_fraction", d.outlier_fraction},
               {"outlier_magnitude", d.outlier_magnitude},
               {"count", a.count},
               {"shape", shape}};
  note() << fmt::format("analyzing {} values of {}\n", a.count, a.dist);
  run.tensors.push_back({a.dist, "generated", shape, analyze_tensor(values, shape, schemes, 0)});
}

void analyze_npy(const Args& a, const std::vector<BlockScaling>& schemes, Run& run) {
  const NpyArray arr = or_usage_error("--input", [&] { return read_npy(a.input); });
  std::vector<float> values;
  try {
    values = npy_to_floats(arr, a.input);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--input ") + e.what());
  }
  if (values.empty()) throw UsageError("--input '" + a.input + "': the array is empty");
  run.input = {{"file", a.input}, {"dtype", arr.descr}, {"shape", arr.shape}};
  note() << fmt::format("analyzing {} ({} values)\n", a.input, values.size());
  const std::string name = std::filesystem::path(a.input).stem().string();
  run.tensors.push_back({name, arr.descr, arr.shape, analyze_tensor(values, arr.shape, schemes, 0)});
}

// The tensors --tensor names or globs (every tensor when none is given), each checked before the
// long work starts.
std::vector<const SafetensorsTensor*> choose_tensors(const Args& a, const SafetensorsFile& file) {
  std::vector<const SafetensorsTensor*> chosen;
  for (const auto& t : file.tensors()) {
    bool take = a.tensors.empty();
    for (const auto& pat : a.tensors) take |= fnmatch(pat.c_str(), t.name.c_str(), 0) == 0;
    if (take) chosen.push_back(&t);
  }
  for (const auto& pat : a.tensors) {
    bool hit = false;
    for (const auto& t : file.tensors()) hit |= fnmatch(pat.c_str(), t.name.c_str(), 0) == 0;
    if (!hit) throw UsageError("--tensor '" + pat + "': no such tensor in '" + a.input + "'; available: " + file.names());
  }
  for (const auto* t : chosen) {
    if (safetensors_dtype_size(t->dtype) == 0)
      throw UsageError("--input '" + a.input + "': tensor '" + t->name + "' has dtype " + t->dtype +
                       ", which is not supported; supported: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, and the integer types");
    if (t->count() == 0) throw UsageError("--input '" + a.input + "': tensor '" + t->name + "' is empty");
  }
  if (chosen.empty()) throw UsageError("--input '" + a.input + "' holds no tensors");
  return chosen;
}

void analyze_safetensors(const Args& a, const std::vector<BlockScaling>& schemes, Run& run) {
  const auto file = or_usage_error("--input", [&] { return std::make_unique<SafetensorsFile>(a.input); });
  const std::vector<const SafetensorsTensor*> chosen = choose_tensors(a, *file);
  nlohmann::json names = nlohmann::json::array();
  for (const auto* t : chosen) names.push_back(t->name);
  run.input = {{"file", a.input}, {"tensors", names}};
  run.chosen = chosen.size();
  // Ctrl-C stops after the tensor in progress; the report holds the tensors that finished.
  run.guard.emplace();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const auto& st = *chosen[i];
    note() << fmt::format("[{}/{}] {} {} {}\n", i + 1, chosen.size(), st.name, st.dtype, fmt::join(st.shape, "x"));
    const std::vector<float> values = or_usage_error("--input", [&] { return file->read_f32(st); });
    run.tensors.push_back({st.name, st.dtype, st.shape, analyze_tensor(values, st.shape, schemes, static_cast<uint32_t>(i))});
    if (run.guard->requested()) break;
  }
}

// Every (tensor, scheme) by QSNR, best first across the tensors (NaN last), ties in input order;
// the tensors with an unranked reason (unranked_reason, one per tensor) are not in it.
nlohmann::json ranking_json(const std::vector<Analyzed>& tensors, const std::vector<std::string>& unranked) {
  struct Row {
    const std::string* tensor;
    const SchemeAnalysis* r;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (unranked[i].empty())
      for (const auto& r : tensors[i].result.schemes) rows.push_back({&tensors[i].name, &r});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    const double a = x.r->error.qsnr_db, b = y.r->error.qsnr_db;
    return std::isnan(a) || std::isnan(b) ? !std::isnan(a) && std::isnan(b) : a > b;
  });
  nlohmann::json ranking = nlohmann::json::array();
  for (const auto& r : rows)
    ranking.push_back({{"tensor", *r.tensor}, {"scheme", r.r->scheme.name}, {"qsnr_db", json_number(r.r->error.qsnr_db)}});
  return ranking;
}

void run(const Args& a) {
  const QuantOptions o = a.quant.resolve();
  check_output(a.out);
  if (a.sort != "qsnr" && a.sort != "mse" && a.sort != "flushed")
    throw UsageError("--sort '" + a.sort + "' is not a sort key; allowed: qsnr, flushed, mse");
  if (a.input.empty() == a.dist.empty()) throw UsageError("give either --input FILE or --dist NAME (not both)");
  if (!a.tensors.empty() && (a.input.empty() || !is_safetensors(a.input)))
    throw UsageError("--tensor selects tensors of a .safetensors --input");
  if (!a.outliers.empty() && a.dist.empty()) throw UsageError("--outliers needs --dist");
  const std::vector<BlockScaling> schemes = or_usage_error("--formats", [&] { return resolve_schemes(a.formats, o); });

  Run run;
  if (!a.dist.empty()) analyze_generated(a, schemes, run);
  else if (!is_safetensors(a.input)) analyze_npy(a, schemes, run);
  else analyze_safetensors(a, schemes, run);

  Report rep("analyze");
  nlohmann::json jschemes = nlohmann::json::array();
  for (const auto& s : schemes) jschemes.push_back(scheme_to_json(s));
  rep.config() = {{"formats", jschemes}, {"options", quant_options_to_json(o)}, {"input", run.input}};
  rep.seeds() = {{"seed", a.quant.seed}};
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> reasons;
  nlohmann::json unranked = nlohmann::json::array();
  for (const auto& t : run.tensors) {
    results.push_back(tensor_json(t));
    reasons.push_back(unranked_reason(results.back()));
    if (!reasons.back().empty()) unranked.push_back({{"tensor", t.name}, {"reason", reasons.back()}});
  }
  rep.results()["tensors"] = results;
  rep.results()["ranking"] = ranking_json(run.tensors, reasons);
  // Only where there is one, so that reports of ranked tensors keep their digests.
  if (!unranked.empty()) rep.results()["unranked"] = unranked;
  // The metrics leave NaN and Inf inputs out, but a block holding one is NaN as a whole: said once
  // per tensor, since a block scheme's QSNR is then nan where a plain format's is not.
  for (const auto& t : run.tensors)
    std::cerr << nonfinite_warning(t.name, t.result.nonfinite, t.result.count, t.result.schemes);
  if (!a.out.json) std::cout << analyze_table(rep.results(), a.sort, a.worst);
  if (run.guard)
    finish_report(rep, a.out, *run.guard, fmt::format("{} of {} tensors", run.tensors.size(), run.chosen));
  else
    finish_report(rep, a.out);
}

const Registrar reg(40, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("analyze", "error, flushing and clipping of formats and block-scaling schemes on a tensor");
  auto a = std::make_shared<Args>();
  cmd->add_option("--input", a->input, ".npy or .safetensors file");
  cmd->add_option("--tensor", a->tensors, "tensor name or glob in a .safetensors file (default: all)");
  cmd->add_option("--dist", a->dist,
                  std::string("generated input: ") + kDistributionSpecs);
  cmd->add_option("--outliers", a->outliers, "FRACTION,MAGNITUDE: that share of values multiplied by MAGNITUDE");
  cmd->add_option("--count", a->count, "number of generated values")->capture_default_str();
  cmd->add_option("--formats,-f", a->formats,
                  "formats and schemes, comma-separated, or all: any format (e4m3, bf16, e3m2:nosub, ...); mxfp8_e4m3, "
                  "mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, nvfp4; <format>:tensor|row|tile128|block128 (FP8 "
                  "recipes), <format>:mx|nvfp4; options :rule=floor|ceil|even|rceil, :block=N, :axis=0|1, :2d, :pow2, "
                  ":fp32, :eps=X, :margin=N")
      ->delimiter(',')
      ->required();
  cmd->add_option("--sort", a->sort, "table order: qsnr (best first), mse or flushed (fewest first)")->capture_default_str();
  cmd->add_option("--worst", a->worst, "show only the N worst (tensor, scheme) rows, worst first");
  a->quant.add_to(cmd, "the generated --dist input");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli

// precsim gpu info|gemm|probe: the same operands on a real GPU (cuBLASLt with a pinned algorithm,
// Tensor Core probe kernels) and through the emulation, compared bit for bit. The GPU library is
// loaded only here; without a driver or device every subcommand exits 3 with the reason.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "gpu_cli.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/hw/gpu_library.h"
#include "precsim/sim/hw/gpu_compare.h"
#include "precsim/sim/hw/gpu_device.h"
#include "precsim/sim/hw/gpu_gemm_check.h"
#include "precsim/sim/hw/gpu_probe.h"
#include "precsim/sim/accum/accum_model_json.h"

namespace precsim::cli {
namespace {

// ---- info
void run_info(const OutputOptions& out) {
  check_output(out);
  const auto gpu = load_gpu_library();
  const GpuSystemInfo s = system_or_throw(*gpu);
  Report r("gpu-info");
  r.config() = nlohmann::json::object();
  r.results() = system_json(s);
  if (!out.json) {
    std::cout << fmt::format("driver {}  runtime {}  cuBLASLt {}  backend {} (compiled for {})\n",
                             version_text(s.system.driver_version), version_text(s.system.runtime_version),
                             s.system.cublaslt_version, s.library, s.system.compiled_architectures);
    for (const auto& d : s.devices)
      std::cout << fmt::format("  [{}] {}  sm_{}{}  {:.1f} GiB  {} SMs  {}\n", d.index, d.name, d.major, d.minor,
                               static_cast<double>(d.total_memory) / (1 << 30), d.multiprocessors, d.pci_bus_id);
  }
  finish_report(r, out);
}

// ---- gemm
struct GemmCli {
  DeviceGemmSpec spec;
  std::string type = "bf16", b_type;
  std::string accumulate = "fp32";
  std::vector<std::string> operands = operand_set_names();
  std::vector<std::string> presets;
  std::string require;
  std::string save_dir;
  uint64_t seed = 1;
  OutputOptions out;
};

// The spec from the options, checked: the types, the accumulation and the FP8 constraints.
void resolve_gemm_spec(GemmCli& c) {
  DeviceGemmSpec& s = c.spec;
  try {
    s.a_type = gpu_type(c.type).name;
    s.b_type = c.b_type.empty() ? s.a_type : gpu_type(c.b_type).name;
    for (const auto& o : c.operands) parse_operand_set(o);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (c.accumulate != "fp32" && c.accumulate != "fp16")
    throw UsageError("--accumulate '" + c.accumulate + "' is not allowed; allowed: fp32, fp16");
  s.fp16_accumulation = c.accumulate == "fp16";
  if (s.fp16_accumulation && s.a_type != "fp16")
    throw UsageError("--accumulate fp16 needs --type fp16 (cuBLASLt compute 16F), not " + s.a_type);
  const bool fp8 = gpu_type(s.a_type).bytes == 1;
  if (fp8 != (gpu_type(s.b_type).bytes == 1) || (!fp8 && s.a_type != s.b_type))
    throw UsageError("--b-type " + s.b_type + " does not go with --type " + s.a_type +
                     "; only the FP8 types (e4m3, e5m2) may be mixed");
  if (!fp8 && (s.fast_accum || s.scale_a != 1 || s.scale_b != 1))
    throw UsageError("--fast-accum, --scale-a and --scale-b apply to FP8 types only (e4m3, e5m2)");
  if (fp8 && (s.m % 16 || s.n % 16 || s.k % 16))
    throw UsageError(fmt::format("FP8 GEMMs need m, n, k multiples of 16; got {}x{}x{}", s.m, s.n, s.k));
  if (!std::isfinite(s.scale_a) || !std::isfinite(s.scale_b))
    throw UsageError("--scale-a and --scale-b must be finite");
}

std::vector<EmulatedPreset> resolve_presets(const GemmCli& c) {
  const DeviceGemmSpec& s = c.spec;
  const std::vector<std::string> names =
      c.presets.empty() ? candidate_presets(gpu_type(s.a_type).format, s.fp16_accumulation) : c.presets;
  std::vector<EmulatedPreset> out;
  for (const auto& p : names) {
    try {
      out.push_back({p, parse_accum_model(p)});
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--presets: ") + e.what());
    }
  }
  if (!c.require.empty() && std::find(names.begin(), names.end(), c.require) == names.end())
    throw UsageError("--require-match " + c.require + " is not among the presets compared");
  return out;
}

nlohmann::json gemm_config(const GemmCli& c, const PrecsimGpuDevice& dev, const std::vector<std::string>& presets) {
  const DeviceGemmSpec& s = c.spec;
  return {{"device", device_json(dev)},
          {"m", s.m}, {"n", s.n}, {"k", s.k},
          {"a_type", s.a_type}, {"b_type", s.b_type}, {"accumulate", c.accumulate},
          {"out_type", gemm_out_type(s)},
          {"fast_accum", s.fast_accum},
          {"scale_a", json_number(s.scale_a)}, {"scale_b", json_number(s.scale_b)},
          {"algo_request", {{"algo_id", s.algo_id}, {"tile_id", s.tile_id}, {"stages_id", s.stages_id}}},
          {"operands", c.operands},
          {"presets", presets},
          {"layout", "A row-major (cuBLASLt TN), B column-major, D column-major; alpha 1, beta 0"}};
}

// Operands and the device result for a second ground truth (gpu/torch_check.py).
void save_operands(const std::string& dir, const DeviceGemmSpec& s, const DeviceGemmCheck& c) {
  const std::string base = dir + "/" + c.operands;
  const std::vector<float> df(c.device.begin(), c.device.end());
  const auto m = static_cast<size_t>(s.m), n = static_cast<size_t>(s.n), k = static_cast<size_t>(s.k);
  write_npy(base + "_a.npy", "<f4", {m, k}, c.a.data(), c.a.size() * 4);
  write_npy(base + "_b.npy", "<f4", {k, n}, c.b.data(), c.b.size() * 4);
  write_npy(base + "_d.npy", "<f4", {m, n}, df.data(), df.size() * 4);
}

nlohmann::json check_json(const DeviceGemmCheck& c, const std::vector<PresetScore>& ranked) {
  nlohmann::json scores = nlohmann::json::array();
  for (const auto& sc : ranked) scores.push_back({{"preset", sc.preset}, {"match", to_json(sc.stats)}});
  return {{"operands", c.operands},
          {"algorithm", to_json(c.algorithm)},
          {"device_ms", json_number(c.algorithm.milliseconds)},
          {"best_preset", ranked.front().preset},
          {"presets", scores}};
}

void print_check(const DeviceGemmCheck& c, const std::vector<PresetScore>& ranked) {
  const PrecsimGpuGemmResult& res = c.algorithm;
  std::cout << fmt::format("{:<14} algo {} tile {} stages {} splitK {}  {:.3f} ms\n", c.operands, res.algo_id,
                           res.tile_id, res.stages_id, res.splitk_num, res.milliseconds);
  for (const auto& sc : ranked)
    std::cout << fmt::format("    {:<42} exact {:>8.4f}%  max ulp {}\n", sc.preset, 100 * sc.stats.exact_fraction,
                             sc.stats.max_ulp);
}

void run_gemm(GemmCli& c) {
  resolve_gemm_spec(c);
  const std::vector<EmulatedPreset> models = resolve_presets(c);
  std::vector<std::string> presets;
  for (const auto& p : models) presets.push_back(p.preset);
  check_output(c.out);
  if (!c.save_dir.empty() && !std::filesystem::is_directory(c.save_dir))
    throw UsageError("--save-operands " + c.save_dir + ": not a folder");
  const auto gpu = load_gpu_library();
  const GpuSystemInfo sys = system_or_throw(*gpu);
  const DeviceGemmSpec& s = c.spec;
  Report r("gpu-gemm");
  r.config() = gemm_config(c, device_or_throw(sys, s.device), presets);
  r.seeds() = {{"operands", c.seed}};
  r.results()["system"] = system_json(sys);
  nlohmann::json sets = nlohmann::json::array();
  std::vector<DeviceGemmCheck> checks;
  for (const auto& name : c.operands) {
    try {
      checks.push_back(check_device_gemm(*gpu, s, name, models, c.seed,
                                         [](const std::string& line) { note() << "gpu gemm: " << line << "\n"; }));
    } catch (const GpuError& e) {
      rethrow(e);
    }
    const DeviceGemmCheck& check = checks.back();
    if (!c.save_dir.empty()) save_operands(c.save_dir, s, check);
    const std::vector<PresetScore> ranked = rank_presets(check.scores);
    sets.push_back(check_json(check, ranked));
    if (!c.out.json) print_check(check, ranked);
  }
  const bool required_ok = c.require.empty() || matches_everywhere(c.require, checks);
  r.results()["sets"] = sets;
  r.results()["best_preset"] = best_preset(presets, checks);
  if (!c.require.empty()) r.results()["required_match"] = {{"preset", c.require}, {"bit_exact", required_ok}};
  finish_report(r, c.out);
  if (!required_ok) {
    std::cerr << "precsim: error: " << c.require << " does not match the device bit for bit\n";
    std::exit(kExitCheckFailed);
  }
}

// ---- probe
struct ProbeCli {
  int device = 0;
  std::vector<std::string> instrs;
  std::vector<std::string> gemms = {"e4m3-fast", "e4m3", "bf16", "fp16"};
  int gemm_k = 512;
  OutputOptions out;
};

// cuBLASLt probe targets: TYPE[-fast], fast meaning FP8 fast accumulation.
DeviceGemmSpec gemm_probe_spec(const std::string& name, int device) {
  DeviceGemmSpec s;
  s.device = device;
  std::string type = name;
  if (type.size() > 5 && type.ends_with("-fast")) {
    type.resize(type.size() - 5);
    s.fast_accum = true;
  }
  try {
    s.a_type = s.b_type = gpu_type(type).name;
  } catch (const std::invalid_argument&) {
    throw UsageError("--gemm '" + name + "' is not allowed; allowed: fp32, tf32, fp16, bf16, e4m3, e5m2, "
                     "e4m3-fast, e5m2-fast");
  }
  if (s.fast_accum && gpu_type(type).bytes != 1) throw UsageError("--gemm " + name + ": -fast applies to FP8 only");
  return s;
}

void run_probe(ProbeCli& c) {
  std::vector<ProbeInstr> instrs;
  try {
    for (const auto& n : c.instrs) instrs.push_back(probe_instr(n));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--instr: ") + e.what());
  }
  std::vector<DeviceGemmSpec> gemms;
  if (c.gemms.size() == 1 && c.gemms[0] == "none") c.gemms.clear();
  for (const auto& g : c.gemms) gemms.push_back(gemm_probe_spec(g, c.device));
  if (c.gemm_k < 64 || c.gemm_k % 32 != 0) throw UsageError(fmt::format("--gemm-k {} must be a multiple of 32, at least 64", c.gemm_k));
  check_output(c.out);
  const auto gpu = load_gpu_library();
  const GpuSystemInfo sys = system_or_throw(*gpu);
  const PrecsimGpuDevice& dev = device_or_throw(sys, c.device);
  const bool all_instrs = c.instrs.empty();
  if (all_instrs) instrs = probe_instrs();

  Report r("gpu-probe");
  nlohmann::json names = nlohmann::json::array();
  for (const auto& i : instrs) names.push_back(i.name);
  r.config() = {{"device", device_json(dev)}, {"instructions", names}, {"gemms", c.gemms}, {"gemm_k", c.gemm_k},
                {"method", "Khattak & Mikaitis probe vectors (docs/reference/sources.md, TC 1.5), one "
                           "block at a time; see sim/include/precsim/sim/hw/gpu_probe.h"}};
  r.results()["system"] = system_json(sys);
  nlohmann::json targets = nlohmann::json::array();
  const std::string source = fmt::format("precsim gpu probe on {} (sm_{}{}), driver {}", dev.name, dev.major, dev.minor,
                                         version_text(sys.system.driver_version));
  auto record = [&](const ProbeTarget& t, const std::string& kind, const ProbeRunner& run, nlohmann::json extra) {
    note() << fmt::format("gpu probe: {} ({} k={})\n", t.name, kind, t.k);
    nlohmann::json row = {{"target", t.name}, {"kind", kind}, {"k", t.k}, {"in", t.in.name}, {"out", t.out.name}};
    row.update(extra);
    try {
      const ProbeResult pr = run_probes(t, run);
      row["findings"] = to_json(pr);
      try {
        const AccumModel m = model_from_probe(t, pr, source);
        row["model"] = to_json(m);
        row["spec"] = to_spec(m);
        if (!c.out.json)
          std::cout << fmt::format("{:<18} n={}{} F={}{} align={} result_bits={} result={} promote={} -> {}\n", t.name,
                                   pr.block_size, pr.block_size_at_least ? "+" : "", pr.frac_bits,
                                   pr.frac_bits_at_least ? "+" : "", pr.align_rounding, pr.out_frac_bits,
                                   pr.out_rounding, pr.promotion_interval, to_spec(m));
      } catch (const std::runtime_error& e) {
        row["model_error"] = e.what();
      }
    } catch (const GpuError& e) {
      if (e.kind != GpuErrorKind::kUnsupported || !all_instrs) rethrow(e);
      row["skipped"] = e.what();  // not on this architecture: reported, not fatal, when probing everything
      if (!c.out.json) std::cout << fmt::format("{:<18} skipped: {}\n", t.name, e.what());
    }
    targets.push_back(row);
  };
  for (const auto& in : instrs) {
    int ik = 0;
    try {
      ik = gpu->probe_k(c.device, in.abi);
    } catch (const GpuError& e) {
      if (e.kind != GpuErrorKind::kUnsupported || !all_instrs) rethrow(e);
      targets.push_back({{"target", in.name}, {"kind", "instruction"}, {"skipped", e.what()}});
      if (!c.out.json) std::cout << fmt::format("{:<18} skipped: {}\n", in.name, e.what());
      continue;
    }
    const ProbeTarget t{in.name, gpu_type(in.in).format, gpu_type(in.out).format, true, 2 * ik};
    record(t, "instruction", instr_runner(*gpu, c.device, in, t.k), {{"instruction_k", ik}});
  }
  for (const auto& g : gemms) {
    nlohmann::json algos = nlohmann::json::array();
    const std::string name = "cublaslt-" + g.a_type + (g.fast_accum ? "-fast" : "");
    const ProbeTarget t{name, gpu_type(g.a_type).format, gpu_type("fp32").format, false, c.gemm_k};
    record(t, "cublaslt", gemm_runner(*gpu, g, t.k, &algos), {{"fast_accum", g.fast_accum}});
    targets.back()["algorithms"] = algos;
  }
  r.results()["targets"] = targets;
  finish_report(r, c.out);
}

const Registrar reg(90, [](CLI::App& app) {
  auto* gpu = app.add_subcommand("gpu", "run GEMMs and Tensor Core probes on a real GPU and compare with the emulation");
  gpu->require_subcommand(1);

  static OutputOptions info_out;
  auto* info = gpu->add_subcommand("info", "list CUDA devices, driver and runtime versions (exit 3 when none)");
  add_output_options(info, info_out);
  info->callback([] { run_info(info_out); });

  static GemmCli g;
  auto* gemm_cmd = gpu->add_subcommand("gemm", "one GEMM through cuBLASLt (pinned algorithm) and through the emulation");
  gemm_cmd->add_option("--type", g.type, "operand type: fp32, tf32, fp16, bf16, e4m3, e5m2")->capture_default_str();
  gemm_cmd->add_option("--b-type", g.b_type, "B's type when it differs (FP8 only)");
  gemm_cmd->add_option("--accumulate", g.accumulate, "fp32, or fp16 (FP16 operands, cuBLASLt compute 16F)")->capture_default_str();
  gemm_cmd->add_flag("--fast-accum", g.spec.fast_accum, "FP8: cuBLASLt fast accumulation (no promotion)");
  gemm_cmd->add_option("--scale-a", g.spec.scale_a, "FP8: per-tensor scale of A")->capture_default_str();
  gemm_cmd->add_option("--scale-b", g.spec.scale_b, "FP8: per-tensor scale of B")->capture_default_str();
  gemm_cmd->add_option("--m", g.spec.m, "rows of A and D")->default_val(128)->check(CLI::Range(1, 16384));
  gemm_cmd->add_option("--n", g.spec.n, "columns of B and D")->default_val(128)->check(CLI::Range(1, 16384));
  gemm_cmd->add_option("--k", g.spec.k, "inner dimension")->default_val(1024)->check(CLI::Range(1, 65536));
  gemm_cmd->add_option("--operands", g.operands, "operand sets: random, wide-exponent, cancellation, alignment")
      ->delimiter(',')->capture_default_str();
  gemm_cmd->add_option("--presets", g.presets, "emulation models to compare (default: those for the type)")->delimiter(',');
  gemm_cmd->add_option("--require-match", g.require, "exit 1 unless this preset matches the device bit for bit");
  gemm_cmd->add_option("--save-operands", g.save_dir, "write A, B and the device's D of each operand set as .npy into this folder");
  gemm_cmd->add_option("--seed", g.seed, seed_help("the generated operands"))->capture_default_str();
  gemm_cmd->add_option("--device", g.spec.device, "CUDA device index")->capture_default_str();
  gemm_cmd->add_option("--algo-id", g.spec.algo_id, "pin this cuBLASLt algorithm id (default: first heuristic result without split-K)");
  gemm_cmd->add_option("--tile-id", g.spec.tile_id, "with --algo-id: tile id");
  gemm_cmd->add_option("--stages-id", g.spec.stages_id, "with --algo-id: stages id");
  add_output_options(gemm_cmd, g.out);
  gemm_cmd->callback([] { run_gemm(g); });

  static ProbeCli p;
  auto* probe = gpu->add_subcommand("probe", "infer the Tensor Core accumulation model from probe vectors");
  probe->add_option("--instr", p.instrs, "instructions: wmma-f16, wmma-bf16, wmma-tf32, wmma-f16-f16, mma-e4m3, mma-e5m2, "
                                         "wgmma-f16, wgmma-bf16, wgmma-e4m3, wgmma-e5m2 "
                                         "(default: all this device runs)")->delimiter(',');
  probe->add_option("--gemm", p.gemms, "cuBLASLt targets: TYPE or TYPE-fast (FP8 fast accumulation), or none")
      ->delimiter(',')->capture_default_str();
  probe->add_option("--gemm-k", p.gemm_k, "vector length of the cuBLASLt probes")->capture_default_str();
  probe->add_option("--device", p.device, "CUDA device index")->capture_default_str();
  add_output_options(probe, p.out);
  probe->callback([] { run_probe(p); });
});

}  // namespace
}  // namespace precsim::cli

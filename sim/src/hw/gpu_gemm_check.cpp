#include "precsim/sim/hw/gpu_gemm_check.h"

#include <fmt/format.h>

#include <map>

#include "precsim/sim/accum/gemm.h"

namespace precsim {

DeviceGemmCheck check_device_gemm(const GpuLibrary& gpu, const DeviceGemmSpec& s, const std::string& operand_set,
                                  const std::vector<EmulatedPreset>& presets, uint64_t seed,
                                  const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const Format fa = gpu_type(s.a_type).format, fb = gpu_type(s.b_type).format;
  const Format fo = gpu_type(gemm_out_type(s)).format;
  DeviceGemmCheck c;
  c.operands = operand_set;
  make_operands(parse_operand_set(operand_set), fa, fb, s.m, s.n, s.k, seed, c.a, c.b);
  say(fmt::format("{} operands, {}x{}x{} {} on the device", operand_set, s.m, s.n, s.k, s.a_type));
  c.device = device_gemm(gpu, s, c.a, c.b, &c.algorithm);
  GemmArgs ga;
  ga.m = s.m;
  ga.n = s.n;
  ga.k = s.k;
  ga.a_format = fa;
  ga.b_format = fb;
  ga.out_format = fo;
  // cuBLASLt applies scale_a * scale_b (an FP32 product) to the accumulator in FP32.
  ga.alpha = static_cast<double>(static_cast<float>(s.scale_a) * static_cast<float>(s.scale_b));
  for (const auto& p : presets) {
    say(fmt::format("{} operands, emulating {}", operand_set, p.preset));
    std::vector<float> e(static_cast<size_t>(s.m * s.n));
    gemm(p.model, ga, c.a.data(), c.b.data(), e.data());
    const std::vector<double> ed(e.begin(), e.end());
    c.scores.push_back({p.preset, compare_results(fo, c.device, ed)});
  }
  return c;
}

std::string best_preset(const std::vector<std::string>& presets, const std::vector<DeviceGemmCheck>& checks) {
  std::map<std::string, uint64_t> exact_total;
  for (const auto& c : checks)
    for (const auto& sc : c.scores) exact_total[sc.preset] += sc.stats.exact;
  std::string best;
  uint64_t best_exact = 0;
  for (const auto& p : presets)
    if (best.empty() || exact_total[p] > best_exact) best = p, best_exact = exact_total[p];
  return best;
}

bool matches_everywhere(const std::string& preset, const std::vector<DeviceGemmCheck>& checks) {
  for (const auto& c : checks)
    for (const auto& sc : c.scores)
      if (sc.preset == preset && sc.stats.exact != sc.stats.count) return false;
  return true;
}

}  // namespace precsim

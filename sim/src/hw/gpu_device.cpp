// Encoding for the device, device GEMMs in row-major terms, and probe runners.
#include "precsim/sim/hw/gpu_device.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/rounding.h"

namespace precsim {

const std::vector<GpuType>& gpu_types() {
  static const std::vector<GpuType> t = {
      {"fp32", format_by_name("fp32"), PRECSIM_GPU_F32, 4},   {"tf32", format_by_name("tf32"), PRECSIM_GPU_TF32, 4},
      {"fp16", format_by_name("fp16"), PRECSIM_GPU_F16, 2},   {"bf16", format_by_name("bf16"), PRECSIM_GPU_BF16, 2},
      {"e4m3", format_by_name("e4m3"), PRECSIM_GPU_E4M3, 1},  {"e5m2", format_by_name("e5m2"), PRECSIM_GPU_E5M2, 1}};
  return t;
}

const GpuType& gpu_type(std::string_view name) {
  for (const auto& t : gpu_types())
    if (t.name == name) return t;
  throw std::invalid_argument("unknown GPU operand type '" + std::string(name) +
                              "'; allowed: fp32, tf32, fp16, bf16, e4m3, e5m2");
}

std::vector<unsigned char> encode_codes(const GpuType& t, const std::vector<double>& values) {
  // TF32 travels in FP32 containers with the low 13 mantissa bits zero.
  const Format& container = t.abi == PRECSIM_GPU_TF32 ? gpu_type("fp32").format : t.format;
  std::vector<unsigned char> out(values.size() * t.bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    if (!std::isnan(x) && round_to(t.format, x) != x)
      throw std::invalid_argument("value " + std::to_string(x) + " is not a value of " + t.format.name);
    const uint64_t code = encode(container, x).code;
    std::memcpy(&out[i * t.bytes], &code, t.bytes);  // little-endian host
  }
  return out;
}

std::vector<double> decode_codes(const GpuType& t, const std::vector<unsigned char>& codes) {
  const Format& container = t.abi == PRECSIM_GPU_TF32 ? gpu_type("fp32").format : t.format;
  std::vector<double> out(codes.size() / t.bytes);
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t code = 0;
    std::memcpy(&code, &codes[i * t.bytes], t.bytes);
    out[i] = decode(container, code);
  }
  return out;
}

std::string gemm_out_type(const DeviceGemmSpec& s) { return s.fp16_accumulation ? "fp16" : "fp32"; }

nlohmann::json to_json(const PrecsimGpuGemmResult& r) {
  return {{"algo_id", r.algo_id},
          {"tile_id", r.tile_id},
          {"stages_id", r.stages_id},
          {"splitk_num", r.splitk_num},
          {"reduction_scheme", r.reduction_scheme},
          {"cta_swizzling", r.cta_swizzling},
          {"custom_option", r.custom_option},
          {"inner_shape_id", r.inner_shape_id},
          {"cluster_shape_id", r.cluster_shape_id},
          {"workspace_bytes", r.workspace_bytes},
          {"heuristic_results", r.heuristic_results}};
}

std::vector<double> device_gemm(const GpuLibrary& gpu, const DeviceGemmSpec& s, const std::vector<float>& a,
                                const std::vector<float>& b, PrecsimGpuGemmResult* result) {
  const GpuType& ta = gpu_type(s.a_type);
  const GpuType& tb = gpu_type(s.b_type);
  const GpuType& to = gpu_type(gemm_out_type(s));
  const size_t m = s.m, n = s.n, k = s.k;
  if (a.size() != m * k || b.size() != k * n) throw std::invalid_argument("device_gemm: operand sizes do not match m, n, k");
  // The GPU library takes B column-major: the transpose of the row-major k x n array.
  std::vector<double> av(a.begin(), a.end()), bt(k * n);
  for (size_t l = 0; l < k; ++l)
    for (size_t j = 0; j < n; ++j) bt[j * k + l] = b[l * n + j];
  const std::vector<unsigned char> ca = encode_codes(ta, av), cb = encode_codes(tb, bt);
  std::vector<unsigned char> cd(m * n * to.bytes);
  PrecsimGpuGemmArgs args{};
  args.device = s.device;
  args.m = static_cast<int>(s.m);
  args.n = static_cast<int>(s.n);
  args.k = static_cast<int>(s.k);
  args.a_type = ta.abi;
  args.b_type = tb.abi;
  args.out_type = to.abi;
  args.compute = s.fp16_accumulation ? PRECSIM_GPU_COMPUTE_16F
                 : ta.abi == PRECSIM_GPU_TF32 ? PRECSIM_GPU_COMPUTE_32F_FAST_TF32
                                              : PRECSIM_GPU_COMPUTE_32F;
  args.fast_accum = s.fast_accum ? 1 : 0;
  args.scale_a = s.scale_a;
  args.scale_b = s.scale_b;
  args.algo_id = s.algo_id;
  args.tile_id = s.tile_id;
  args.stages_id = s.stages_id;
  args.a = ca.data();
  args.b = cb.data();
  args.d = cd.data();
  *result = gpu.gemm(args);
  const std::vector<double> dcol = decode_codes(to, cd);  // column-major m x n
  std::vector<double> d(m * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) d[i * n + j] = dcol[j * m + i];
  return d;
}

const std::vector<ProbeInstr>& probe_instrs() {
  static const std::vector<ProbeInstr> p = {{"wmma-f16", PRECSIM_GPU_WMMA_F16_F32, "fp16", "fp32"},
                                            {"wmma-bf16", PRECSIM_GPU_WMMA_BF16_F32, "bf16", "fp32"},
                                            {"wmma-tf32", PRECSIM_GPU_WMMA_TF32_F32, "tf32", "fp32"},
                                            {"wmma-f16-f16", PRECSIM_GPU_WMMA_F16_F16, "fp16", "fp16"},
                                            {"mma-e4m3", PRECSIM_GPU_MMA_E4M3_F32, "e4m3", "fp32"},
                                            {"mma-e5m2", PRECSIM_GPU_MMA_E5M2_F32, "e5m2", "fp32"},
                                            {"wgmma-f16", PRECSIM_GPU_WGMMA_F16_F32, "fp16", "fp32"},
                                            {"wgmma-bf16", PRECSIM_GPU_WGMMA_BF16_F32, "bf16", "fp32"},
                                            {"wgmma-e4m3", PRECSIM_GPU_WGMMA_E4M3_F32, "e4m3", "fp32"},
                                            {"wgmma-e5m2", PRECSIM_GPU_WGMMA_E5M2_F32, "e5m2", "fp32"}};
  return p;
}

const ProbeInstr& probe_instr(std::string_view name) {
  for (const auto& p : probe_instrs())
    if (p.name == name) return p;
  std::string allowed;
  for (const auto& p : probe_instrs()) allowed += (allowed.empty() ? "" : ", ") + p.name;
  throw std::invalid_argument("unknown probe instruction '" + std::string(name) + "'; allowed: " + allowed);
}

ProbeRunner instr_runner(const GpuLibrary& gpu, int device, const ProbeInstr& instr, int k) {
  return [&gpu, device, instr, k](const std::vector<ProbeVector>& vs) {
    const GpuType& ti = gpu_type(instr.in);
    const GpuType& to = gpu_type(instr.out);
    std::vector<double> a, b, c;
    for (const auto& v : vs) {
      a.insert(a.end(), v.a.begin(), v.a.end());
      b.insert(b.end(), v.b.begin(), v.b.end());
      c.push_back(v.c);
    }
    const std::vector<unsigned char> ca = encode_codes(ti, a), cb = encode_codes(ti, b), cc = encode_codes(to, c);
    std::vector<unsigned char> cd(vs.size() * to.bytes);
    PrecsimGpuProbeArgs args{};
    args.device = device;
    args.instr = instr.abi;
    args.count = static_cast<int>(vs.size());
    args.k = k;
    args.a = ca.data();
    args.b = cb.data();
    args.c = cc.data();
    args.d = cd.data();
    gpu.probe(args);
    return decode_codes(to, cd);
  };
}

ProbeRunner gemm_runner(const GpuLibrary& gpu, const DeviceGemmSpec& spec, int k, nlohmann::json* algos) {
  return [&gpu, spec, k, algos](const std::vector<ProbeVector>& vs) {
    DeviceGemmSpec s = spec;
    const int64_t size = (static_cast<int64_t>(vs.size()) + 15) / 16 * 16;
    s.m = s.n = size;
    s.k = k;
    std::vector<float> a(size * k, 0.0f), b(k * size, 0.0f);
    for (size_t i = 0; i < vs.size(); ++i)
      for (int l = 0; l < k; ++l) {
        a[i * k + l] = static_cast<float>(vs[i].a[l]);
        b[l * size + i] = static_cast<float>(vs[i].b[l]);
      }
    PrecsimGpuGemmResult r{};
    const std::vector<double> d = device_gemm(gpu, s, a, b, &r);
    if (algos != nullptr) algos->push_back(to_json(r));
    std::vector<double> out(vs.size());
    for (size_t i = 0; i < vs.size(); ++i) out[i] = d[i * size + i];
    return out;
  };
}

}  // namespace precsim

// A stand-in for libprecsim_gpu.so in tests: the same C interface, answered by the emulation with
// the H100 presets, so that `precsim gpu ...` can be run end to end on a machine without a GPU.
// It honours the interface's layouts (A row-major, B and D column-major, codes little-endian), so
// a layout slip on the caller's side shows up as a mismatch. Never installed, never bundled.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"
#include "precsim/gpu/gpu_api.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"

namespace {

using namespace precsim;

int fail(char* err, size_t len, int status, const std::string& msg) {
  std::snprintf(err, len, "%s", msg.c_str());
  return status;
}

Format value_format(int type) {
  switch (type) {
    case PRECSIM_GPU_TF32: return format_by_name("tf32");
    case PRECSIM_GPU_F16: return format_by_name("fp16");
    case PRECSIM_GPU_BF16: return format_by_name("bf16");
    case PRECSIM_GPU_E4M3: return format_by_name("e4m3");
    case PRECSIM_GPU_E5M2: return format_by_name("e5m2");
    default: return format_by_name("fp32");
  }
}
size_t bytes_of(int type) { return type == PRECSIM_GPU_F16 || type == PRECSIM_GPU_BF16 ? 2 : type >= PRECSIM_GPU_E4M3 ? 1 : 4; }

float load(int type, const void* base, size_t i) {
  uint64_t code = 0;
  std::memcpy(&code, static_cast<const unsigned char*>(base) + i * bytes_of(type), bytes_of(type));
  const Format f = type == PRECSIM_GPU_TF32 ? format_by_name("fp32") : value_format(type);
  return static_cast<float>(decode(f, code));
}
void store(int type, void* base, size_t i, double v) {
  const uint64_t code = encode(value_format(type), v).code;
  std::memcpy(static_cast<unsigned char*>(base) + i * bytes_of(type), &code, bytes_of(type));
}

int system_info(PrecsimGpuSystem* sys, PrecsimGpuDevice* devices, int max_devices, char*, size_t) {
  std::memset(sys, 0, sizeof(*sys));
  sys->driver_version = 13000;
  sys->runtime_version = 13000;
  sys->device_count = 1;
  std::snprintf(sys->compiled_architectures, sizeof(sys->compiled_architectures), "fake");
  if (max_devices > 0) {
    std::memset(devices, 0, sizeof(*devices));
    std::snprintf(devices[0].name, sizeof(devices[0].name), "precsim fake H100 (emulated)");
    devices[0].major = 9;
    devices[0].total_memory = uint64_t{80} << 30;
    devices[0].multiprocessors = 132;
    std::snprintf(devices[0].pci_bus_id, sizeof(devices[0].pci_bus_id), "fake");
  }
  return PRECSIM_GPU_OK;
}

AccumModel model_for(int type, int fast_accum, bool fp16_acc) {
  if (fp16_acc) return parse_accum_model("h100-f16acc");
  if (type == PRECSIM_GPU_TF32) return parse_accum_model("h100-tf32");
  if (type == PRECSIM_GPU_F32) return parse_accum_model("fp32-seq");
  if (type >= PRECSIM_GPU_E4M3) return parse_accum_model(fast_accum ? "h100-fp8-fast" : "h100-fp8-promote");
  return parse_accum_model("h100");
}

int gemm(const PrecsimGpuGemmArgs* a, PrecsimGpuGemmResult* r, char* err, size_t len) {
  if (a->device != 0) return fail(err, len, PRECSIM_GPU_BAD_ARGUMENT, "fake: only device 0");
  if (a->a_type >= PRECSIM_GPU_E4M3 && (a->m % 16 || a->n % 16 || a->k % 16))
    return fail(err, len, PRECSIM_GPU_BAD_ARGUMENT, "fake: FP8 needs multiples of 16");
  const size_t m = a->m, n = a->n, k = a->k;
  std::vector<float> av(m * k), bv(k * n);  // both row-major for gemm()
  for (size_t i = 0; i < m * k; ++i) av[i] = load(a->a_type, a->a, i);
  for (size_t j = 0; j < n; ++j)
    for (size_t l = 0; l < k; ++l) bv[l * n + j] = load(a->b_type, a->b, j * k + l);
  GemmArgs g;
  g.m = a->m;
  g.n = a->n;
  g.k = a->k;
  g.a_format = value_format(a->a_type);
  g.b_format = value_format(a->b_type);
  g.out_format = value_format(a->out_type);
  g.alpha = static_cast<double>(a->scale_a * a->scale_b);
  std::vector<float> d(m * n);
  gemm(model_for(a->a_type, a->fast_accum, a->compute == PRECSIM_GPU_COMPUTE_16F), g, av.data(), bv.data(), d.data());
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) store(a->out_type, a->d, j * m + i, d[i * n + j]);
  *r = PrecsimGpuGemmResult{};
  r->algo_id = 66;
  r->splitk_num = 1;
  r->heuristic_results = 1;
  return PRECSIM_GPU_OK;
}

struct Instr {
  int in, out, k;
  const char* model;
};
Instr instr(int i) {
  switch (i) {
    case PRECSIM_GPU_WMMA_F16_F32: return {PRECSIM_GPU_F16, PRECSIM_GPU_F32, 16, "h100"};
    case PRECSIM_GPU_WMMA_BF16_F32: return {PRECSIM_GPU_BF16, PRECSIM_GPU_F32, 16, "h100"};
    case PRECSIM_GPU_WMMA_TF32_F32: return {PRECSIM_GPU_TF32, PRECSIM_GPU_F32, 8, "h100-tf32"};
    case PRECSIM_GPU_WMMA_F16_F16: return {PRECSIM_GPU_F16, PRECSIM_GPU_F16, 16, "h100-f16acc"};
    case PRECSIM_GPU_MMA_E4M3_F32: return {PRECSIM_GPU_E4M3, PRECSIM_GPU_F32, 32, "h100-fp8-fast"};
    case PRECSIM_GPU_MMA_E5M2_F32: return {PRECSIM_GPU_E5M2, PRECSIM_GPU_F32, 32, "h100-fp8-fast"};
    case PRECSIM_GPU_WGMMA_F16_F32: return {PRECSIM_GPU_F16, PRECSIM_GPU_F32, 16, "h100"};
    case PRECSIM_GPU_WGMMA_BF16_F32: return {PRECSIM_GPU_BF16, PRECSIM_GPU_F32, 16, "h100"};
    case PRECSIM_GPU_WGMMA_E4M3_F32: return {PRECSIM_GPU_E4M3, PRECSIM_GPU_F32, 32, "h100-fp8-fast"};
    default: return {PRECSIM_GPU_E5M2, PRECSIM_GPU_F32, 32, "h100-fp8-fast"};
  }
}

int probe_support(int device, int i, int* k, char* err, size_t len) {
  if (device != 0) return fail(err, len, PRECSIM_GPU_BAD_ARGUMENT, "fake: only device 0");
  if (i < 0 || i >= PRECSIM_GPU_INSTR_COUNT) return fail(err, len, PRECSIM_GPU_BAD_ARGUMENT, "fake: unknown instruction");
  if (i == PRECSIM_GPU_MMA_E5M2_F32) return fail(err, len, PRECSIM_GPU_UNSUPPORTED, "fake: e5m2 mma left out on purpose");
  *k = instr(i).k;
  return PRECSIM_GPU_OK;
}

int probe(const PrecsimGpuProbeArgs* p, char* err, size_t len) {
  int k = 0;
  if (const int s = probe_support(p->device, p->instr, &k, err, len)) return s;
  const Instr in = instr(p->instr);
  const AccumModel m = parse_accum_model(in.model);
  for (int v = 0; v < p->count; ++v) {
    std::vector<float> a(p->k), b(p->k);
    for (int l = 0; l < p->k; ++l) {
      a[l] = load(in.in, p->a, static_cast<size_t>(v) * p->k + l);
      b[l] = load(in.in, p->b, static_cast<size_t>(v) * p->k + l);
    }
    const double c = load(in.out, p->c, v);
    store(in.out, p->d, v, accum_dot(m, a, b, c, value_format(in.in), value_format(in.in)));
  }
  return PRECSIM_GPU_OK;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PrecsimGpuApi* precsim_gpu_api(void) {
  static const PrecsimGpuApi table = {PRECSIM_GPU_ABI_VERSION, &system_info, &gemm, &probe, &probe_support};
  return &table;
}

// Device runs in precsim's terms: operand types by name, values encoded into the codes the GPU library
// takes and results decoded back, a device GEMM on row-major float operands, and probe runners
// that evaluate ProbeVectors with a Tensor Core instruction or a cuBLASLt GEMM.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/hw/gpu_library.h"
#include "precsim/sim/hw/gpu_probe.h"

namespace precsim {

struct GpuType {
  std::string name;  // fp32, tf32, fp16, bf16, e4m3, e5m2
  Format format;     // the values it holds (tf32 travels as FP32 codes)
  int abi = 0;       // PrecsimGpuType
  int bytes = 4;     // code size on the device
};
const std::vector<GpuType>& gpu_types();
// Throws std::invalid_argument naming the value and the allowed names.
const GpuType& gpu_type(std::string_view name);

// Little-endian codes of `values` (each must be a value of t.format; throws otherwise).
std::vector<unsigned char> encode_codes(const GpuType& t, const std::vector<double>& values);
std::vector<double> decode_codes(const GpuType& t, const std::vector<unsigned char>& codes);

struct DeviceGemmSpec {
  int device = 0;
  int64_t m = 0, n = 0, k = 0;
  std::string a_type = "bf16", b_type = "bf16";
  bool fp16_accumulation = false;  // compute 16F with an FP16 result; else FP32 accumulation and result
  bool fast_accum = false;         // FP8 only
  float scale_a = 1, scale_b = 1;  // FP8 only
  int algo_id = -1, tile_id = -1, stages_id = -1;
};
// Output type of the spec: "fp16" with FP16 accumulation, else "fp32".
std::string gemm_out_type(const DeviceGemmSpec& s);
nlohmann::json to_json(const PrecsimGpuGemmResult& r);

// D = A B with A row-major m x k and B row-major k x n (values of their types); D row-major m x n.
std::vector<double> device_gemm(const GpuLibrary& gpu, const DeviceGemmSpec& s, const std::vector<float>& a,
                                const std::vector<float>& b, PrecsimGpuGemmResult* result);

// Probe instructions by name: wmma-f16, wmma-bf16, wmma-tf32, wmma-f16-f16, mma-e4m3, mma-e5m2,
// wgmma-f16, wgmma-bf16, wgmma-e4m3, wgmma-e5m2 (sm_90a).
struct ProbeInstr {
  std::string name;
  int abi;
  std::string in, out;  // gpu type names
};
const std::vector<ProbeInstr>& probe_instrs();
const ProbeInstr& probe_instr(std::string_view name);

ProbeRunner instr_runner(const GpuLibrary& gpu, int device, const ProbeInstr& instr, int k);
// Each batch is one GEMM with m = n = the batch size rounded up to 16: vector i is row i of A and
// column i of B, and its result is D(i, i). Every call's algorithm goes into *algos.
ProbeRunner gemm_runner(const GpuLibrary& gpu, const DeviceGemmSpec& spec, int k, nlohmann::json* algos);

}  // namespace precsim

// The one exported symbol of libprecsim_gpu.so: the table of entry points (gpu_api.h).
#include "precsim/gpu/gpu_api.h"

namespace precsim::gpu {
int system_info(PrecsimGpuSystem*, PrecsimGpuDevice*, int, char*, size_t);
int gemm(const PrecsimGpuGemmArgs*, PrecsimGpuGemmResult*, char*, size_t);
int probe(const PrecsimGpuProbeArgs*, char*, size_t);
int probe_support(int, int, int*, char*, size_t);
}  // namespace precsim::gpu

extern "C" __attribute__((visibility("default"))) const PrecsimGpuApi* precsim_gpu_api(void) {
  static const PrecsimGpuApi table = {PRECSIM_GPU_ABI_VERSION, &precsim::gpu::system_info, &precsim::gpu::gemm,
                                          &precsim::gpu::probe, &precsim::gpu::probe_support};
  return &table;
}

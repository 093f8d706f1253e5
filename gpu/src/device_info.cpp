// Device discovery: driver and runtime versions and one row per device. A missing or insufficient
// driver (CUDA error 35) and a machine without a device (100) both count as "no device".
#include <cstring>
#include <string>

#include "cuda_check.h"

#ifndef PRECSIM_CUDA_ARCHS
#define PRECSIM_CUDA_ARCHS "unknown"
#endif

namespace precsim::gpu {

void select_device(int device) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw Failure{PRECSIM_GPU_NO_DEVICE, "no CUDA device is present"};
  if (device < 0 || device >= count)
    throw Failure{PRECSIM_GPU_BAD_ARGUMENT, "device " + std::to_string(device) + " does not exist; devices 0.." +
                                                std::to_string(count - 1) + " are present"};
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

size_t type_bytes(int type) {
  switch (type) {
    case PRECSIM_GPU_F32:
    case PRECSIM_GPU_TF32: return 4;
    case PRECSIM_GPU_F16:
    case PRECSIM_GPU_BF16: return 2;
    case PRECSIM_GPU_E4M3:
    case PRECSIM_GPU_E5M2: return 1;
    default: throw Failure{PRECSIM_GPU_BAD_ARGUMENT, "unknown element type " + std::to_string(type)};
  }
}

int system_info(PrecsimGpuSystem* sys, PrecsimGpuDevice* devices, int max_devices, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    std::memset(sys, 0, sizeof(*sys));
    std::snprintf(sys->compiled_architectures, sizeof(sys->compiled_architectures), "%s", PRECSIM_CUDA_ARCHS);
    check_cuda(cudaRuntimeGetVersion(&sys->runtime_version), "cudaRuntimeGetVersion");
    sys->cublaslt_version = static_cast<int>(cublasLtGetVersion());
    // Without a driver this reports 0 and succeeds; the device count below names the error.
    cudaDriverGetVersion(&sys->driver_version);
    check_cuda(cudaGetDeviceCount(&sys->device_count), "cudaGetDeviceCount");
    if (sys->device_count == 0) throw Failure{PRECSIM_GPU_NO_DEVICE, "cudaGetDeviceCount found no CUDA device"};
    for (int i = 0; i < sys->device_count && i < max_devices; ++i) {
      cudaDeviceProp p{};
      check_cuda(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
      PrecsimGpuDevice& d = devices[i];
      std::memset(&d, 0, sizeof(d));
      d.index = i;
      std::snprintf(d.name, sizeof(d.name), "%s", p.name);
      d.major = p.major;
      d.minor = p.minor;
      d.total_memory = p.totalGlobalMem;
      d.multiprocessors = p.multiProcessorCount;
      cudaDeviceGetPCIBusId(d.pci_bus_id, sizeof(d.pci_bus_id), i);
    }
  });
}

}  // namespace precsim::gpu

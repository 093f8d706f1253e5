// What the GPU commands share (`precsim gpu ...`, `precsim train --backend cuda`): loading the CUDA
// library and mapping its failures to the CLI's exit codes (no library or no device: 3; an
// unsupported or bad request: 2; any other CUDA failure: 1 with the CUDA error string).
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "precsim/sim/hw/gpu_library.h"

namespace precsim::cli {

// GPU library failures in the CLI's exit-code convention.
[[noreturn]] inline void rethrow(const GpuError& e) {
  switch (e.kind) {
    case GpuErrorKind::kNoLibrary:
    case GpuErrorKind::kNoDevice: throw NoDevice(std::string("no usable GPU: ") + e.what());
    case GpuErrorKind::kUnsupported:
    case GpuErrorKind::kBadArgument: throw UsageError(e.what());
    case GpuErrorKind::kCudaError: throw std::runtime_error(std::string("CUDA failure: ") + e.what());
  }
  throw std::runtime_error(e.what());
}

inline std::shared_ptr<const GpuLibrary> load_gpu_library() {
  try {
    return GpuLibrary::load();
  } catch (const GpuError& e) {
    rethrow(e);
  }
}

inline std::string version_text(int v) { return v <= 0 ? "none" : fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

inline nlohmann::json device_json(const PrecsimGpuDevice& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"compute_capability", fmt::format("{}.{}", d.major, d.minor)},
          {"memory_bytes", d.total_memory},
          {"multiprocessors", d.multiprocessors},
          {"pci_bus_id", d.pci_bus_id}};
}

inline GpuSystemInfo system_or_throw(const GpuLibrary& gpu) {
  try {
    return gpu.system_info();
  } catch (const GpuError& e) {
    rethrow(e);
  }
}

inline const PrecsimGpuDevice& device_or_throw(const GpuSystemInfo& sys, int device) {
  if (device < 0 || device >= static_cast<int>(sys.devices.size()))
    throw UsageError(fmt::format("--device {} does not exist; devices 0..{} are present", device, sys.devices.size() - 1));
  return sys.devices[static_cast<size_t>(device)];
}

inline nlohmann::json system_json(const GpuSystemInfo& s) {
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : s.devices) devs.push_back(device_json(d));
  return {{"library", s.library},
          {"driver_version", version_text(s.system.driver_version)},
          {"runtime_version", version_text(s.system.runtime_version)},
          {"cublaslt_version", s.system.cublaslt_version},
          {"compiled_architectures", s.system.compiled_architectures},
          {"devices", devs}};
}

}  // namespace precsim::cli

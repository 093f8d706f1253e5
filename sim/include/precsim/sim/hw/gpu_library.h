// The GPU library seen from sim/: libprecsim_gpu.so is loaded with dlopen when a GPU command
// first needs it, so CPU commands never load the CUDA runtime or cuBLASLt and precsim runs where no
// driver exists. Failures become GpuError with a kind the CLI maps to its exit codes.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/gpu/gpu_api.h"

namespace precsim {

enum class GpuErrorKind {
  kNoLibrary,    // the library is missing or cannot be loaded (no CUDA runtime, not built)
  kNoDevice,     // no driver, an insufficient driver, or no device (CUDA errors 35, 100)
  kUnsupported,  // not available on this device or in this build
  kBadArgument,
  kCudaError,    // any other CUDA or cuBLASLt failure; the message carries its error string
};

struct GpuError : std::runtime_error {
  GpuError(GpuErrorKind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
  GpuErrorKind kind;
};

struct GpuSystemInfo {
  PrecsimGpuSystem system{};
  std::vector<PrecsimGpuDevice> devices;
  std::string library;  // path of the loaded library
};

class GpuLibrary {
 public:
  // Loads the library: $PRECSIM_GPU_LIBRARY when set (and nothing else), else libprecsim_gpu.so
  // beside the executable, in ../lib, in the build tree, then the system search path. Throws
  // GpuError(kNoLibrary) listing every place tried and why it failed.
  static std::shared_ptr<const GpuLibrary> load();
  static std::shared_ptr<const GpuLibrary> load_from(const std::string& path);
  ~GpuLibrary();

  const std::string& path() const { return path_; }
  GpuSystemInfo system_info() const;
  PrecsimGpuGemmResult gemm(const PrecsimGpuGemmArgs& args) const;
  // Instruction k of a probe instruction; throws when it cannot run on `device`.
  int probe_k(int device, int instr) const;
  void probe(const PrecsimGpuProbeArgs& args) const;

 private:
  GpuLibrary(void* handle, const PrecsimGpuApi* table, std::string path)
      : handle_(handle), table_(table), path_(std::move(path)) {}
  void* handle_;
  const PrecsimGpuApi* table_;
  std::string path_;
};

// Maps a library status to an error kind (PrecsimGpuStatus -> GpuErrorKind).
GpuErrorKind gpu_error_kind(int status);

}  // namespace precsim

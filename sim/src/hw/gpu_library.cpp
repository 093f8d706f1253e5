// dlopen of libprecsim_gpu.so and the C++ face of its function table.
#include "precsim/sim/hw/gpu_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>

namespace precsim {
namespace {

constexpr const char* kLibraryName = "libprecsim_gpu.so";

std::string executable_dir() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  return std::filesystem::path(std::string(buf.data(), static_cast<size_t>(n))).parent_path().string();
}

std::vector<std::string> candidates() {
  std::vector<std::string> c;
  const std::string dir = executable_dir();
  if (!dir.empty()) {
    c.push_back(dir + "/" + kLibraryName);
    c.push_back(dir + "/../lib/" + kLibraryName);
  }
#ifdef PRECSIM_GPU_BUILD_LIBRARY
  c.push_back(PRECSIM_GPU_BUILD_LIBRARY);
#endif
  c.push_back(kLibraryName);  // the system search path (LD_LIBRARY_PATH, ld.so.cache)
  return c;
}

void check(int status, const std::string& err) {
  if (status != PRECSIM_GPU_OK) throw GpuError(gpu_error_kind(status), err);
}

}  // namespace

GpuErrorKind gpu_error_kind(int status) {
  switch (status) {
    case PRECSIM_GPU_NO_DEVICE: return GpuErrorKind::kNoDevice;
    case PRECSIM_GPU_UNSUPPORTED: return GpuErrorKind::kUnsupported;
    case PRECSIM_GPU_BAD_ARGUMENT: return GpuErrorKind::kBadArgument;
    default: return GpuErrorKind::kCudaError;
  }
}

std::shared_ptr<const GpuLibrary> GpuLibrary::load_from(const std::string& path) {
  // A library without its own path separators is looked up by the system; a relative path with
  // one is taken as given.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    throw GpuError(GpuErrorKind::kNoLibrary, path + ": " + (e ? e : "dlopen failed"));
  }
  auto entry = reinterpret_cast<PrecsimGpuApiEntry>(dlsym(h, PRECSIM_GPU_ENTRY_SYMBOL));
  if (entry == nullptr) {
    dlclose(h);
    throw GpuError(GpuErrorKind::kNoLibrary, path + ": no symbol " PRECSIM_GPU_ENTRY_SYMBOL);
  }
  const PrecsimGpuApi* table = entry();
  if (table == nullptr || table->abi_version != PRECSIM_GPU_ABI_VERSION) {
    const int v = table ? table->abi_version : -1;
    dlclose(h);
    throw GpuError(GpuErrorKind::kNoLibrary, path + ": GPU library ABI version " + std::to_string(v) +
                                                 ", this precsim needs " + std::to_string(PRECSIM_GPU_ABI_VERSION));
  }
  return std::shared_ptr<const GpuLibrary>(new GpuLibrary(h, table, path));
}

std::shared_ptr<const GpuLibrary> GpuLibrary::load() {
  if (const char* env = std::getenv("PRECSIM_GPU_LIBRARY"); env != nullptr && *env != '\0') {
    try {
      return load_from(env);
    } catch (const GpuError& e) {
      throw GpuError(GpuErrorKind::kNoLibrary,
                     std::string("the GPU library named by PRECSIM_GPU_LIBRARY could not be loaded: ") + e.what());
    }
  }
  std::string tried;
  for (const auto& c : candidates()) {
    const bool by_search = c.find('/') == std::string::npos;
    if (!by_search && !std::filesystem::exists(c)) {
      tried += "\n  " + c + ": not present";
      continue;
    }
    try {
      return load_from(c);
    } catch (const GpuError& e) {
      tried += std::string("\n  ") + e.what();
    }
  }
  throw GpuError(GpuErrorKind::kNoLibrary,
                 "the GPU library (libprecsim_gpu.so) could not be loaded; it is built when nvcc is found "
                 "(PRECSIM_CUDA=AUTO|ON) and needs the CUDA 13 runtime and cuBLASLt. Tried:" +
                     tried);
}

GpuLibrary::~GpuLibrary() {
  // The CUDA runtime registers exit handlers inside the library; unloading it before exit would
  // leave them dangling, so the handle stays open for the life of the process.
  (void)handle_;
}

GpuSystemInfo GpuLibrary::system_info() const {
  GpuSystemInfo info;
  info.library = path_;
  std::array<PrecsimGpuDevice, 64> devs{};
  std::array<char, 1024> err{};
  // The status first, the message after: both in one call would read err before it is written.
  const int status = table_->system_info(&info.system, devs.data(), static_cast<int>(devs.size()), err.data(), err.size());
  check(status, err.data());
  const int n = std::min<int>(info.system.device_count, static_cast<int>(devs.size()));
  info.devices.assign(devs.begin(), devs.begin() + n);
  return info;
}

PrecsimGpuGemmResult GpuLibrary::gemm(const PrecsimGpuGemmArgs& args) const {
  PrecsimGpuGemmResult r{};
  std::array<char, 1024> err{};
  const int status = table_->gemm(&args, &r, err.data(), err.size());
  check(status, err.data());
  return r;
}

int GpuLibrary::probe_k(int device, int instr) const {
  int k = 0;
  std::array<char, 1024> err{};
  const int status = table_->probe_support(device, instr, &k, err.data(), err.size());
  check(status, err.data());
  return k;
}

void GpuLibrary::probe(const PrecsimGpuProbeArgs& args) const {
  std::array<char, 1024> err{};
  const int status = table_->probe(&args, err.data(), err.size());
  check(status, err.data());
}

}  // namespace precsim

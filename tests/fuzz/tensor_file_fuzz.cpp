// libFuzzer target for the tensor files `precsim analyze` and `precsim gemm` read: the same bytes
// go through the .npy reader and the .safetensors reader. Each must end in an array whose size
// matches its header, or in std::invalid_argument naming the file; any other exception, crash,
// oversized allocation or sanitizer finding is a bug. scripts/fuzz.sh runs it under libFuzzer;
// tests/tensor_fuzz_test.cpp replays tests/fuzz/tensor_corpus/ in the default test run.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "precsim/reports/npy.h"
#include "precsim/reports/safetensors.h"

namespace precsim_fuzz {

// The readers take paths, so each input goes through one file per process.
inline const std::filesystem::path& scratch_file() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("precsim_tensor_fuzz_" + std::to_string(::getpid()));
  return p;
}

inline void read_npy_input(const std::filesystem::path& p) {
  try {
    const precsim::NpyArray a = precsim::read_npy(p);
    // The element count does not wrap around, and the data is all there.
    unsigned __int128 count = 1;
    for (size_t d : a.shape) count = count * d > UINT64_MAX ? UINT64_MAX + static_cast<unsigned __int128>(1) : count * d;
    if (count != a.count() || a.data.size() != a.count() * a.item_size()) std::abort();
  } catch (const std::invalid_argument&) {
  }
}

inline void read_safetensors_input(const std::filesystem::path& p) {
  try {
    const precsim::SafetensorsFile f(p);
    for (const auto& t : f.tensors()) {
      if (precsim::safetensors_dtype_size(t.dtype) == 0) continue;
      if (f.read_f32(t).size() != t.count()) std::abort();
    }
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace precsim_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& p = precsim_fuzz::scratch_file();
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  precsim_fuzz::read_npy_input(p);
  precsim_fuzz::read_safetensors_input(p);
  std::filesystem::remove(p);
  return 0;
}

#include "precsim/sim/data/npy_floats.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>

#include "precsim/formats/format.h"
#include "precsim/formats/quantize.h"
#include "precsim/reports/npy.h"

namespace precsim {

std::vector<float> npy_to_floats(const NpyArray& file, const std::string& path) {
  NpyArray reordered;
  if (file.fortran_order) {
    reordered = file;
    to_c_order(reordered);
  }
  const NpyArray& a = file.fortran_order ? reordered : file;
  const size_t n = a.count();
  std::vector<float> out(n);
  // Element by element through memcpy: the data buffer has no alignment promise for T.
  auto conv = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
      out[i] = static_cast<float>(v);
    }
  };
  const std::string& d = a.descr;
  // An empty array has no buffers: memcpy from a null pointer is undefined even for 0 bytes (UBSan).
  if (d == "<f4") {
    if (n) std::memcpy(out.data(), a.data.data(), n * 4);
  }
  else if (d == "<f8") conv(double{});
  else if (d == "<f2") decode_array(format_by_name("fp16"), a.data.data(), std::span<float>(out));
  else if (d == "|i1") conv(int8_t{});
  else if (d == "|u1" || d == "|b1") conv(uint8_t{});
  else if (d == "<i2") conv(int16_t{});
  else if (d == "<u2") conv(uint16_t{});
  else if (d == "<i4") conv(int32_t{});
  else if (d == "<u4") conv(uint32_t{});
  else if (d == "<i8") conv(int64_t{});
  else if (d == "<u8") conv(uint64_t{});
  else
    throw std::invalid_argument("'" + path + "': dtype " + d + " is not supported; allowed: " + kNpyFloatDtypes);
  return out;
}

FloatTensor read_npy_floats(const std::filesystem::path& path) {
  const NpyArray a = read_npy(path);
  return {a.descr, a.shape, npy_to_floats(a, path.string())};
}

}  // namespace precsim

// NumPy .npy files (format versions 1.0 to 3.0): read whole arrays, write them atomically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace precsim {

struct NpyArray {
  std::string descr;          // dtype as NumPy writes it: "<f4", "<f8", "|u1", "|V1" ...
  std::vector<size_t> shape;  // empty for a 0-d array
  bool fortran_order = false;
  std::vector<unsigned char> data;

  size_t count() const;
  size_t item_size() const;  // bytes per element, from descr
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data.data()); }
};

// Throws std::invalid_argument naming the file and what is wrong: missing, not .npy, a corrupt or
// unsupported header, big-endian or object data, or fewer data bytes than the header promises.
NpyArray read_npy(const std::filesystem::path& path);

// Rewrites a Fortran-order (column-major) array's data in row-major order and clears
// fortran_order, so that every reader sees one layout; a row-major array is left as it is.
void to_c_order(NpyArray& a);

// The header of an array as NumPy writes it (version 1.0, padded to 64 bytes).
std::string npy_header(const std::string& descr, const std::vector<size_t>& shape);
// Writes through write_file_atomic: no partial file on failure.
void write_npy(const std::filesystem::path& path, const std::string& descr,
               const std::vector<size_t>& shape, const void* data, size_t bytes);

}  // namespace precsim

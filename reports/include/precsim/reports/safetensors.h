// Reader for .safetensors files (Hugging Face): an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the
// data. The header is checked completely on open (a header that lies about sizes or offsets, or a
// truncated file, is an error naming the tensor and the numbers); tensor data is memory-mapped
// only while one tensor is converted and unmapped right after, so a multi-GB checkpoint streams
// through a small resident set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace precsim {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // "F32", "BF16", "F8_E4M3", "I8", ...
  std::vector<size_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets into the data section
  size_t count() const;        // number of elements (1 for a 0-d tensor)
};

class SafetensorsFile {
 public:
  // Throws std::invalid_argument naming the file and what is wrong.
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in data order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const SafetensorsTensor* find(std::string_view name) const;
  // "a, b, c" (for error messages listing what exists).
  std::string names() const;

  // The tensor's values as float32: F32, F16, BF16, F8_E4M3 (float8_e4m3fn), F8_E5M2 and
  // integers exactly where float holds them; F64, I32, U32, I64, U64 rounded to nearest.
  std::vector<float> read_f32(const SafetensorsTensor& t) const;

  // dtypes read_f32 accepts.
  static const std::vector<std::string>& supported_dtypes();

 private:
  std::filesystem::path path_;
  uint64_t data_start_ = 0;
  uint64_t file_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Byte size of one element of a safetensors dtype; 0 when unknown.
size_t safetensors_dtype_size(std::string_view dtype);

}  // namespace precsim

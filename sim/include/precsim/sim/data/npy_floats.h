// .npy arrays as float32 values: the one conversion every command that reads tensors from .npy
// files uses (analyze, gemm), and the future Python API with them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace precsim {

struct NpyArray;  // precsim/reports/npy.h

// The element types npy_to_floats converts, as NumPy writes them (for error messages).
inline constexpr const char* kNpyFloatDtypes = "<f4, <f8, <f2, |i1, |u1, |b1, <i2, <u2, <i4, <u4, <i8, <u8";

// Every element of `a` as a float, row-major (a Fortran-order array is reordered; static_cast
// from its type; float16 decoded exactly). Throws std::invalid_argument "'<path>': ..." for a
// dtype outside kNpyFloatDtypes; `path` only names the array in the message.
std::vector<float> npy_to_floats(const NpyArray& a, const std::string& path);

struct FloatTensor {
  std::string dtype;          // the file's dtype, e.g. "<f2"
  std::vector<size_t> shape;  // empty for a 0-d array
  std::vector<float> values;  // row-major
};
// read_npy, then npy_to_floats: throws std::invalid_argument naming the file and what is wrong.
FloatTensor read_npy_floats(const std::filesystem::path& path);

}  // namespace precsim

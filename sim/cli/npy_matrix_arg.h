// A matrix operand given as a .npy file on the command line (gemm's --a/--b/--c, mma's), read
// once for every command that takes one, so that their errors read the same.
#pragma once

#include <exception>
#include <string>

#include <fmt/format.h>

#include "cli_common.h"

namespace precsim::cli {

// read(path)'s result, its errors prefixed by the option ("--a: ..."), refused unless it has
// 2 dimensions. read returns a type with a `shape` vector (NpyArray, FloatTensor).
template <typename Read>
auto read_matrix_file(const char* option, const std::string& path, Read read) {
  decltype(read(path)) x;
  try {
    x = read(path);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("{}: {}", option, e.what()));
  }
  if (x.shape.size() != 2)
    throw UsageError(fmt::format("{} '{}': a matrix needs 2 dimensions, the file has {}", option, path, x.shape.size()));
  return x;
}

}  // namespace precsim::cli

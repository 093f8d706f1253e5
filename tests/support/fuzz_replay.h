// Replays a libFuzzer corpus in a GoogleTest: every file of `dir` goes through `target` (a
// fuzz target's LLVMFuzzerTestOneInput) and must not throw. Returns how many inputs ran.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace precsim::testing {

inline size_t replay_corpus(const std::filesystem::path& dir, int (*target)(const uint8_t*, size_t)) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_NO_THROW(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ++n;
  }
  return n;
}

}  // namespace precsim::testing

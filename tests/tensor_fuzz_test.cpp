// Replays the fuzz corpus of the tensor-file readers (tests/fuzz/tensor_corpus/: .npy and
// .safetensors inputs, among them every input libFuzzer found crashing) in the default test run:
// each must end in an array the size its header promises or in a documented error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../tests/fuzz/tensor_file_fuzz.cpp"
#include "support/fuzz_replay.h"

namespace {

TEST(TensorFuzzCorpus, EveryInputEndsInAnArrayOrADocumentedError) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/tensor_corpus";
  EXPECT_GE(precsim::testing::replay_corpus(dir, LLVMFuzzerTestOneInput), 8u);
}

// The corpus's valid seeds really are read (so the replay exercises more than the error paths).
TEST(TensorFuzzCorpus, ValidSeedsParse) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/tensor_corpus";
  const precsim::NpyArray a = precsim::read_npy(dir / "f8_2d.npy");
  ASSERT_EQ(a.descr, "<f8");
  ASSERT_EQ(a.shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(a.as<double>()[5], 5.0 / 7.0);
  const precsim::SafetensorsFile f(dir / "mixed.safetensors");
  ASSERT_EQ(f.tensors().size(), 5u);
  const auto* s = f.find("s");
  ASSERT_NE(s, nullptr);
  // e4m3fn codes 0x38, 0x7e, 0x7f, 0x01: 1.0, 448 (the largest finite), NaN, 2^-9 (smallest subnormal).
  const std::vector<float> v = f.read_f32(*s);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 448.0f);
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_EQ(v[3], 0x1p-9f);
}

// Headers that once ended in std::out_of_range, std::bad_alloc, a 2 GB allocation before the
// truncation was noticed, or a silently wrapped element count: each is now refused before any
// allocation, with a message naming the value.
TEST(TensorFuzzCorpus, LyingNpyHeadersAreRefusedNamingTheValue) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/tensor_corpus";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"crash_npy_dim_digits.npy", "shape (123456789012345678901234567890,) has more elements"},
      {"crash_npy_count_wraps.npy", "shape (4294967296, 4294967296) has more elements"},
      {"crash_npy_size_digits.npy", "unsupported item size 123456789012345678901234567890"},
      {"crash_npy_huge_shape.npy", "promises 4000000000000000000 bytes, the file holds 16"},
      {"crash_npy_promises_more.npy", "promises 2147483648 bytes, the file holds 16"},
  };
  for (const auto& [file, message] : cases) {
    SCOPED_TRACE(file);
    try {
      precsim::read_npy(dir / file);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace

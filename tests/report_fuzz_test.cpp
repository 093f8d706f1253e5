// Replays the fuzz corpus of the report reader (tests/fuzz/corpus/) in the default test run: no
// input may end in anything but a report or a documented error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../tests/fuzz/report_reader_fuzz.cpp"

namespace {

TEST(ReportFuzzCorpus, EveryInputEndsInAReportOrADocumentedError) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/corpus";
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_NO_THROW(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ++n;
  }
  EXPECT_GE(n, 10u);
}

}  // namespace

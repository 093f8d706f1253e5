// Replays the fuzz corpus of the report reader (tests/fuzz/corpus/) in the default test run: no
// input may end in anything but a report or a documented error.
#include <gtest/gtest.h>

#include <filesystem>

#include "../tests/fuzz/report_reader_fuzz.cpp"
#include "support/fuzz_replay.h"

namespace {

TEST(ReportFuzzCorpus, EveryInputEndsInAReportOrADocumentedError) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/corpus";
  EXPECT_GE(precsim::testing::replay_corpus(dir, LLVMFuzzerTestOneInput), 10u);
}

}  // namespace

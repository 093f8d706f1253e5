// Replays the fuzz corpora of the report reader (tests/fuzz/corpus/) and of the rules of `report
// check` (tests/fuzz/rules_corpus/) in the default test run: no input may end in anything but a
// report (or rules) or a documented error.
#include <gtest/gtest.h>

#include <filesystem>

#include "../tests/fuzz/report_reader_fuzz.cpp"
#define LLVMFuzzerTestOneInput fuzz_check_rules
#include "../tests/fuzz/check_rules_fuzz.cpp"
#undef LLVMFuzzerTestOneInput
#include "support/fuzz_replay.h"

namespace {

TEST(ReportFuzzCorpus, EveryInputEndsInAReportOrADocumentedError) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/corpus";
  EXPECT_GE(precsim::testing::replay_corpus(dir, LLVMFuzzerTestOneInput), 10u);
}

TEST(ReportFuzzCorpus, EveryRulesFileEndsInRulesOrAnInvalidArgument) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/rules_corpus";
  EXPECT_GE(precsim::testing::replay_corpus(dir, fuzz_check_rules), 10u);
}

}  // namespace

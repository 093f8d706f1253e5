// Replays the fuzz corpora of the configuration readers in the default test run (no sanitizers
// here; scripts/fuzz.sh runs the same targets under ASan + UBSan): every train config, recipe and
// sweep file of tests/fuzz/{train_config,recipe,sweep}_corpus/ must end in a value that reads back
// to itself or in std::invalid_argument; the targets abort otherwise.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/fuzz_replay.h"

// Each target defines LLVMFuzzerTestOneInput; renamed here so that three live in one test.
#define LLVMFuzzerTestOneInput fuzz_train_config
#include "../tests/fuzz/train_config_fuzz.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_recipe_json
#include "../tests/fuzz/recipe_json_fuzz.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_sweep_file
#include "../tests/fuzz/sweep_file_fuzz.cpp"
#undef LLVMFuzzerTestOneInput

namespace {

std::filesystem::path corpus(const char* name) {
  return std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz" / name;
}

TEST(ConfigFuzzCorpus, EveryTrainConfigEndsInAConfigOrAnInvalidArgument) {
  EXPECT_GE(precsim::testing::replay_corpus(corpus("train_config_corpus"), fuzz_train_config), 20u);
}

TEST(ConfigFuzzCorpus, EveryRecipeEndsInARecipeOrAnInvalidArgument) {
  EXPECT_GE(precsim::testing::replay_corpus(corpus("recipe_corpus"), fuzz_recipe_json), 20u);
}

TEST(ConfigFuzzCorpus, EverySweepFileEndsInAPlanOrAnInvalidArgument) {
  EXPECT_GE(precsim::testing::replay_corpus(corpus("sweep_corpus"), fuzz_sweep_file), 5u);
}

// The regression inputs of the sweep reader: each is refused with the reader's own error.
TEST(ConfigFuzzCorpus, AGridOfTooManyUnitsAndAHugeIndexAreRefusedByName) {
  const auto refusal = [](const char* file) {
    std::ifstream in(corpus("sweep_corpus") / file);
    try {
      precsim::plan_sweep(nlohmann::json::parse(in));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // 256^8 units wrap size_t to 0: the plan was empty and the sweep did nothing.
  EXPECT_EQ(refusal("regress_units_wrap.json"),
            "the sweep has 1.845e+19 units (list points times grid values); at most 100000 are allowed: split it into "
            "several sweeps");
  EXPECT_NE(refusal("regress_index_digits.json").find("'99999999999999999999999' is not an index into it"),
            std::string::npos);
}

}  // namespace

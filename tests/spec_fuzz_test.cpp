// Replays tests/fuzz/spec_corpus/ (formats, block-scaling schemes, accumulation models,
// distributions and the bare NAME[:k=v...] grammar) in the default test run: every spec must end
// in a value that reads back to itself or in std::invalid_argument; the target aborts otherwise.
#include <gtest/gtest.h>

#include <filesystem>

#include "../tests/fuzz/spec_fuzz.cpp"
#include "support/fuzz_replay.h"

namespace {

TEST(SpecFuzzCorpus, EverySpecEndsInAValueOrAnInvalidArgument) {
  const std::filesystem::path dir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/fuzz/spec_corpus";
  EXPECT_GE(precsim::testing::replay_corpus(dir, LLVMFuzzerTestOneInput), 40u);
}

// Found by spec_fuzz: fma=1 on a model that does not fuse was accepted and did nothing, so the
// model's canonical spec (which writes fma only for seq) read back as another model.
TEST(SpecFuzzCorpus, FmaOnAModelThatDoesNotFuseIsRefused) {
  try {
    precsim::parse_accum_model("kahan:acc=e5m2:fma=1");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "accumulation model: fma=1 applies to seq only; kahan rounds each product and sum as it defines");
  }
  EXPECT_TRUE(precsim::parse_accum_model("seq:fma=1").fma);
}

// Found by spec_fuzz: "fp32-fma:F=3" set a block parameter that no sequential sum reads.
TEST(SpecFuzzCorpus, BlockKeysOnAModelThatIsNotBlockAreRefused) {
  for (const char* spec : {"fp32-fma:F=3", "pairwise:n=16", "kahan:cnan=0"}) {
    try {
      precsim::parse_accum_model(spec);
      ADD_FAILURE() << spec << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("applies to the block model only, not to "), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(precsim::parse_accum_model("h100:F=30").block.frac_bits, 30);
}

}  // namespace

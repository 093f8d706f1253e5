// libFuzzer target for recipe JSON (a config's recipe object, `train --recipe FILE`): any JSON
// must end in a Recipe or in std::invalid_argument naming the key; a json::exception, any other
// exception, a crash or a sanitizer report is a bug. The recipe written back (recipe_to_json, what
// a report holds) must read back to the same JSON. tests/config_fuzz_test.cpp replays the corpus.
#include <cstdlib>
#include <stdexcept>

#include "fuzz_json.h"
#include "precsim/sim/train/recipe_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = precsim_fuzz::parse_json_input(data, size);
  if (!j) return 0;
  precsim::Recipe r;
  try {
    r = precsim::recipe_from_json(*j, "fp32");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const nlohmann::json written = precsim::recipe_to_json(r);
  if (precsim::recipe_to_json(precsim::recipe_from_json(written, r.name)) != written) std::abort();
  return 0;
}

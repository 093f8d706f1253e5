// libFuzzer target for the train config reader (`precsim train --config`, the sweep's base). Any
// JSON must end in a configuration or in std::invalid_argument naming the key (the documented
// error); a json::exception (a type the reader did not check), any other exception, a crash or a
// sanitizer report is a bug. A configuration read back from its resolved JSON must give the same
// JSON: the sweep and the reports rely on that. tests/config_fuzz_test.cpp replays the corpus.
#include <cstdlib>
#include <stdexcept>

#include "fuzz_json.h"
#include "precsim/sim/experiment/runner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = precsim_fuzz::parse_json_input(data, size);
  if (!j) return 0;
  precsim::TrainConfig c;
  try {
    c = precsim::train_config_from_json(*j);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const nlohmann::json resolved = precsim::train_config_to_json(c);
  if (precsim::train_config_to_json(precsim::train_config_from_json(resolved)) != resolved) std::abort();
  return 0;
}

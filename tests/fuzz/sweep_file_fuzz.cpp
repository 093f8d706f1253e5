// libFuzzer target for sweep files (`precsim sweep PLAN`): any JSON must end in a plan or in
// std::invalid_argument naming the entry; any other exception, a crash or a sanitizer report is a
// bug. Every unit of a plan has a distinct id and a configuration that reads back to itself.
// Plans over kFuzzUnits units are skipped before planning (each unit resolves a configuration, so
// a large grid is slow, not wrong); the reader's own limit (kMaxSweepUnits) is still reached, as
// it refuses before resolving anything. tests/config_fuzz_test.cpp replays the corpus.
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "fuzz_json.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/experiment/sweep_plan.h"

namespace {

constexpr size_t kFuzzUnits = 16;

// Units the plan would have, saturating; 0 when the file is not shaped like a sweep.
size_t unit_count(const nlohmann::json& j) {
  if (!j.is_object()) return 0;
  size_t n = 1;
  const auto grow = [&](size_t k) { n = (k != 0 && n > SIZE_MAX / k) ? SIZE_MAX : n * k; };
  if (j.contains("list") && j["list"].is_array()) grow(j["list"].size());
  if (j.contains("grid") && j["grid"].is_array())
    for (const auto& a : j["grid"])
      if (a.is_object() && a.contains("values") && a["values"].is_array()) grow(a["values"].size());
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = precsim_fuzz::parse_json_input(data, size);
  if (!j) return 0;
  const size_t units = unit_count(*j);
  if (units > kFuzzUnits && units <= precsim::kMaxSweepUnits) return 0;
  precsim::SweepPlan plan;
  try {
    plan = precsim::plan_sweep(*j);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  std::set<std::string> ids;
  for (const precsim::SweepUnit& u : plan.units) {
    if (!ids.insert(u.id).second) std::abort();
    if (precsim::train_config_to_json(precsim::train_config_from_json(u.config)) != u.config) std::abort();
  }
  precsim::longest_first(plan, {});
  return 0;
}

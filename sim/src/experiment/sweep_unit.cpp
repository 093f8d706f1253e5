#include "precsim/sim/experiment/sweep_unit.h"

#include <system_error>

#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/runner.h"

namespace precsim {

std::filesystem::path unit_report_path(const std::filesystem::path& out_dir, const SweepUnit& u) {
  return out_dir / "units" / (u.id + ".json");
}

std::string run_sweep_unit(const SweepUnit& u) {
  const TrainConfig c = train_config_from_json(u.config);
  Report r("train");
  r.config() = u.config;
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  r.seeds() = {{"seed", c.seed}, {"seeds", seeds}};
  r.results() = train_results_json(run_training(c));
  return r.document(/*deterministic=*/true).dump(2) + "\n";
}

nlohmann::json read_finished_unit(const std::filesystem::path& file, const SweepUnit& u) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return nullptr;
  try {
    nlohmann::json doc = load_report(file);
    if (doc["kind"] != "train" || doc["status"] != "complete" || doc["config"] != u.config) return nullptr;
    if (doc["digest"] != results_digest(doc["results"])) return nullptr;
    return doc;
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace precsim

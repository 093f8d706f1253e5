#include "train_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

namespace precsim::cli {

TrainConfig parse_train_config(const nlohmann::json& j, const std::string& source) {
  try {
    return train_config_from_json(j);
  } catch (const std::invalid_argument& e) {
    throw UsageError(source + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(source + ": " + e.what());
  }
}

void run_train_report(const TrainConfig& c, const OutputOptions& out) {
  check_output(out);
  Report r("train");
  r.config() = train_config_to_json(c);
  nlohmann::json seeds = nlohmann::json::array();
  for (int s = 0; s < c.seeds; ++s) seeds.push_back(c.seed + s);
  r.seeds() = {{"seed", c.seed}, {"seeds", seeds}};
  const bool tty = isatty(STDERR_FILENO);
  int last_pct = -1;
  const Progress progress = [&](int si, int64_t step, int64_t total) {
    const int pct = int((100 * (step + 1)) / total);
    if (pct == last_pct && step + 1 != total) return;
    last_pct = pct;
    const int filled = pct / 4;
    std::cerr << fmt::format("{}seed {}/{} [{:<25}] {:3d}% step {}/{}{}", tty ? "\r" : "", si + 1, c.seeds,
                             std::string(filled, '#'), pct, step + 1, total, tty ? "" : "\n");
    if (step + 1 == total) std::cerr << (tty ? "\n" : ""), last_pct = -1;
  };
  try {
    r.results() = run_training(c, progress);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!out.json) std::cout << summary_table(r.results());
  finish_report(r, out);
}

}  // namespace precsim::cli

// What a train (or demo) run found, read once from its results into typed rows: the table printed
// under the run (the FP64 reference row first), its legend, and one finding line per notable
// variant computed from the numbers (what flushed, what stagnated, which gap is outside the seed
// noise and the chaos floor). Read from the results JSON so that `report summary` prints the same
// from a report on disk.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace precsim {

// A summary metric over seeds: the mean and, with several seeds, its 95% interval.
struct SeedMean {
  double mean = 0;
  std::optional<std::array<double, 2>> ci95;
};

struct VariantRow {
  std::string name;
  SeedMean final_loss, heldout_loss, loss_gap;
  double heldout_accuracy = 0, local_grad_rel_err = 0, drift_over_chaos_floor = 0;
  double underflow_fraction = 0, stagnation_fraction = 0, weight_grad_underflow = 0, skipped_steps = 0;
  int diverged_seeds = 0;           // seeds whose loss diverged
  std::optional<long> diverged_at;  // the step, with one seed
};

struct TrainSummary {
  std::vector<VariantRow> variants;
  double ref_final_loss = 0, ref_heldout_loss = 0, ref_heldout_accuracy = 0;  // means over seeds
  bool classification = false;  // the reference's held-out accuracy was ever non-zero
  int seeds = 1;
  // Mean over seeds of |chaos_loss - loss| of the reference at the last logged step: the loss a
  // one-ulp perturbation of the initial weights moves (negative when the report has no series).
  double loss_chaos_floor = -1;
};

// Throws nlohmann::json::exception when the results are not shaped as train writes them.
TrainSummary train_summary_from_json(const nlohmann::json& results);
// The variant table, the reference first; accuracy only for classification.
std::string train_summary_table(const TrainSummary& s);
// One line per column of train_summary_table.
std::string train_summary_legend(const TrainSummary& s);
// The findings, each a sentence with the numbers it rests on; never empty.
std::vector<std::string> train_findings(const TrainSummary& s);

}  // namespace precsim

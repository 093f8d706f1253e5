// The side-by-side experiment: an FP64 reference, an FP64 chaos control started one FP32 ulp away,
// and every variant step in lockstep from identical initial weights on identical batches. Local
// error comes from shadow steps (the variant's arithmetic at the reference's weights and batch);
// global error compares the free-running runs and is read against the chaos floor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/items.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/experiment/train_results.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {

class GemmExecutor;

// Which model a configuration trains ("mlp" | "transformer" as model.type).
enum class ModelKind : uint8_t { kMlp, kTransformer };
std::string_view to_string(ModelKind);

struct TrainConfig {
  ModelKind model_type = ModelKind::kMlp;  // model.type
  DataConfig data;                 // mlp
  ItemsConfig items;               // mlp: items per row for loss normalisation (default: one each)
  MlpConfig model;                 // mlp
  SeqDataConfig seq_data;          // transformer: data
  TransformerConfig transformer;   // transformer: model
  OptimizerConfig optimizer;
  int64_t steps = 300;
  int batch = 64;
  uint64_t seed = 1;
  int seeds = 1;                  // repeat everything for seed, seed+1, ...
  int shadow_every = 10;          // local-error shadow step period (0: none)
  int log_every = 0;              // series period; 0: at most 200 points
  int eval_every = 0;             // held-out evaluation period; 0: 10 evaluations
  double divergence_factor = 10;  // a variant diverges at a non-finite loss, or a loss above
                                  // factor x the reference's loss that is also above the initial loss
  std::vector<int64_t> histogram_steps;  // exponent histograms of gradients (default: first, last)
  std::vector<Recipe> variants;
};

// Strict parsing: unknown keys anywhere are rejected with the valid keys listed; recipes are
// preset names or objects {"name", "preset", overrides...}. Throws std::invalid_argument.
TrainConfig train_config_from_json(const nlohmann::json& j);
nlohmann::json train_config_to_json(const TrainConfig& c);
// Reference text of every key (docs/reference/config.md).
std::string train_config_doc();

// Called after each step: (seed index, step, total steps).
using Progress = std::function<void(int, int64_t, int64_t)>;

// What a caller can hook into a run (all optional).
struct RunHooks {
  Progress progress;
  // At every logged step, once per live variant: {"seed", "step", "variant", and the value of each
  // of that variant's series at that step} (the --jsonl stream).
  std::function<void(const nlohmann::json&)> on_logged_step;
  // Polled once per step, before it runs. True makes that step the last one (logged and evaluated
  // like a final step) and starts no further seed: the results then hold what finished, and each
  // run's "steps_completed" says how far it got.
  std::function<bool()> stop;
  // When set (`precsim train --backend cuda`), every variant of an MLP also runs as a twin whose
  // matrix products go to the backend made here for its recipe, from the same initial weights on
  // the same batches; each run's variant then reports the twin's per-step differences from the
  // emulated variant under "backend" (docs/reference/metrics.md). `executor_name` names it there.
  std::function<std::shared_ptr<GemmExecutor>(const Recipe&)> gemm_executor;
  std::string executor_name;
};

// The results of the experiment (train_results.h). Throws std::invalid_argument on data or shape
// errors before any step runs.
TrainResults run_training(const TrainConfig& c, const RunHooks& hooks = {});
// The same as the results object of a train report: train_results_json(run_training(c, hooks)).
nlohmann::json run_training_json(const TrainConfig& c, const RunHooks& hooks = {});

// Bytes a recipe needs for the model's weights, master copy, gradients, optimizer state and the
// stored activations of one batch and of one micro-batch (batch / (workers x micro-batches) rows,
// what one forward of the split step holds at its peak), block-scale overhead and the
// accumulation buffer included.
MemoryEstimate memory_estimate(const Recipe& r, const MlpLayout& l, const OptimizerConfig& o, int batch);
// The same for the transformer: batch sequences, activations by transformer_activation_bytes in
// the recipe's activation and scores formats (LayerNorm outputs FP32 under autocast).
MemoryEstimate memory_estimate(const Recipe& r, const TransformerLayout& l, const OptimizerConfig& o, int batch);

// Split variants' table (the error the split alone adds, the activation memory it saves) as
// text; "" when no variant is split. The variant table itself is train_findings.h's.
std::string split_table(const nlohmann::json& results);

}  // namespace precsim

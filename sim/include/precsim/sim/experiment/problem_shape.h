// The sizes of an experiment's problem from its configuration alone: the training set's rows and
// the model's layout, as the problem run_training builds for any seed would have them, without
// generating data or initialising weights (an npy or text data set's files are read for their
// shapes). Throws std::invalid_argument as building the problem would, for the data's and the
// model's configuration.
#pragma once

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {

struct MlpShape {
  DataShape data;
  MlpLayout layout;
};
MlpShape mlp_shape(const TrainConfig& c);

struct TransformerShape {
  SeqDataShape data;
  TransformerLayout layout;
};
TransformerShape transformer_shape(const TrainConfig& c);

}  // namespace precsim

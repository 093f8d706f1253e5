#include "precsim/sim/experiment/problem_shape.h"

namespace precsim {

// As MlpProblem and TransformerProblem make their layouts from their data.
MlpShape mlp_shape(const TrainConfig& c) {
  MlpShape s;
  s.data = data_shape(c.data);
  s.layout = make_mlp_layout(c.model, s.data.features, s.data.outputs);
  return s;
}

TransformerShape transformer_shape(const TrainConfig& c) {
  TransformerShape s;
  s.data = seq_data_shape(c.seq_data, c.transformer.context);
  s.layout = make_transformer_layout(c.transformer, s.data.vocab);
  return s;
}

}  // namespace precsim

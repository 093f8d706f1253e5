// A multilayer perceptron: linear layers with an activation between them, optional LayerNorm
// before each activation, optional residual connections where a hidden layer keeps its width.
// All parameters live in one flat buffer carved into per-layer views (llm.c style).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace precsim {

enum class Activation : uint8_t { kRelu, kGelu };

struct MlpConfig {
  std::vector<int> hidden = {64, 64};
  std::string activation = "relu";  // relu | gelu (tanh form)
  bool layernorm = false;           // LayerNorm between each hidden linear layer and its activation
  bool batchnorm = false;           // BatchNorm there instead: training-mode statistics over the rows of
                                    // each forward (a micro-batch of a worker in a split step), or
                                    // synchronised across workers (ParallelSpec::batchnorm)
  bool residual = false;            // h = x + act(...) where a hidden layer's input and output widths agree
  double init_scale = 1.0;          // weights ~ N(0, (init_scale^2) / fan_in); biases 0; LN weight 1, bias 0
};

// Offsets into the flat parameter buffer.
struct LinearSlots {
  int in = 0, out = 0;
  size_t w = 0, b = 0;            // w is (out,in), b (out)
  bool hidden = false;            // followed by [LayerNorm], activation [, residual]
  bool layernorm = false;
  bool batchnorm = false;         // ln_w, ln_b then hold BatchNorm's weight and bias
  size_t ln_w = 0, ln_b = 0;      // (out)
  size_t bn_stats = 0;            // BatchNorm: offset of this layer's channels in the running statistics
  bool residual = false;
};

struct MlpLayout {
  int input = 0, output = 0;
  Activation activation = Activation::kRelu;
  std::vector<LinearSlots> layers;
  size_t param_count = 0;
  size_t bn_channels = 0;  // running-statistics entries (BatchNorm channels of all layers)
};

// Throws std::invalid_argument on an unknown activation or a width < 1.
MlpLayout make_mlp_layout(const MlpConfig& c, int input, int output);
// Initial parameters, each an FP32 value (so that every run starts from identical weights).
std::vector<double> init_mlp(const MlpLayout& l, const MlpConfig& c, uint64_t seed);


}  // namespace precsim

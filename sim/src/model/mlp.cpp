#include "precsim/sim/model/mlp.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/random.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/model/model_json.h"

namespace precsim {

MlpLayout make_mlp_layout(const MlpConfig& c, int input, int output) {
  MlpLayout l;
  if (c.activation == "relu") l.activation = Activation::kRelu;
  else if (c.activation == "gelu") l.activation = Activation::kGelu;
  else throw std::invalid_argument(fmt::format("unknown model.activation '{}'; allowed: relu, gelu", c.activation));
  if (c.layernorm && c.batchnorm)
    throw std::invalid_argument("model.layernorm and model.batchnorm are both true; choose one normalisation");
  if (input < 1 || output < 1) throw std::invalid_argument("model: input and output widths must be >= 1");
  l.input = input;
  l.output = output;
  size_t off = 0;
  int prev = input;
  std::vector<int> widths = c.hidden;
  widths.push_back(output);
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] < 1) throw std::invalid_argument(fmt::format("model.hidden[{}] = {} must be >= 1", i, widths[i]));
    LinearSlots s;
    s.in = prev;
    s.out = widths[i];
    s.w = off;
    off += size_t(s.in) * s.out;
    s.b = off;
    off += s.out;
    s.hidden = i + 1 < widths.size();
    if (s.hidden && (c.layernorm || c.batchnorm)) {
      s.layernorm = c.layernorm;
      s.batchnorm = c.batchnorm;
      if (s.batchnorm) {
        s.bn_stats = l.bn_channels;
        l.bn_channels += size_t(s.out);
      }
      s.ln_w = off;
      off += s.out;
      s.ln_b = off;
      off += s.out;
    }
    s.residual = s.hidden && c.residual && s.in == s.out;
    l.layers.push_back(s);
    prev = s.out;
  }
  l.param_count = off;
  return l;
}

std::vector<double> init_mlp(const MlpLayout& l, const MlpConfig& c, uint64_t seed) {
  std::vector<double> p(l.param_count, 0.0);
  for (size_t i = 0; i < l.layers.size(); ++i) {
    const LinearSlots& s = l.layers[i];
    const double sd = c.init_scale / std::sqrt(double(s.in));
    for (size_t k = 0; k < size_t(s.in) * s.out; ++k)
      p[s.w + k] = static_cast<float>(sd * standard_normal(seed, 1000 + i, k));
    if (s.layernorm || s.batchnorm)
      for (int k = 0; k < s.out; ++k) p[s.ln_w + k] = 1.0;
  }
  return p;
}

nlohmann::json mlp_config_to_json(const MlpConfig& c) {
  return {{"hidden", c.hidden},
          {"activation", c.activation},
          {"layernorm", c.layernorm},
          {"batchnorm", c.batchnorm},
          {"residual", c.residual},
          {"init_scale", c.init_scale}};
}

MlpConfig mlp_config_from_json(const nlohmann::json& j) {
  const nlohmann::json m = merge_config(mlp_config_to_json(MlpConfig{}), j, "model");
  MlpConfig c;
  c.hidden.clear();
  for (const auto& w : m["hidden"]) {
    if (!w.is_number_integer()) throw std::invalid_argument("model.hidden: expected an array of integers, got " + m["hidden"].dump());
    c.hidden.push_back(w.get<int>());
  }
  c.activation = m["activation"];
  c.layernorm = m["layernorm"];
  c.batchnorm = m["batchnorm"];
  c.residual = m["residual"];
  c.init_scale = m["init_scale"];
  return c;
}

}  // namespace precsim

// The transformer's parameter layout, initial weights and configuration.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/sim/core/random.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/model/transformer.h"
#include "precsim/sim/model/model_json.h"

namespace precsim {

TransformerLayout make_transformer_layout(const TransformerConfig& c, int vocab) {
  auto positive = [](const char* key, int v, int lo, int hi) {
    if (v < lo || v > hi) throw std::invalid_argument(fmt::format("model.{} {} is out of range; allowed: {}..{}", key, v, lo, hi));
  };
  positive("layers", c.layers, 1, 64);
  positive("heads", c.heads, 1, 256);
  positive("width", c.width, 1, 8192);
  positive("context", c.context, 1, 8192);
  positive("mlp_ratio", c.mlp_ratio, 1, 16);
  if (vocab < 2) throw std::invalid_argument(fmt::format("vocabulary of {} tokens; a language model needs at least 2", vocab));
  if (c.width % c.heads != 0)
    throw std::invalid_argument(fmt::format("model.width {} is not a multiple of model.heads {}", c.width, c.heads));
  for (auto [key, v] : {std::pair{"init_scale", c.init_scale}, {"qk_init_scale", c.qk_init_scale}, {"outlier_scale", c.outlier_scale}})
    if (!(v > 0) || !std::isfinite(v)) throw std::invalid_argument(fmt::format("model.{} {} must be a finite number > 0", key, v));
  TransformerLayout l;
  l.vocab = vocab;
  l.context = c.context;
  l.width = c.width;
  l.heads = c.heads;
  l.hidden = c.mlp_ratio * c.width;
  l.tied = c.tied;
  l.outlier_scale = c.outlier_scale;
  if (c.outlier_layer < -1 || c.outlier_layer >= c.layers)
    throw std::invalid_argument(fmt::format("model.outlier_layer {} is out of range; allowed: -1 (every block) or 0..{}",
                                            c.outlier_layer, c.layers - 1));
  l.outlier_layer = c.outlier_layer;
  const size_t C = size_t(c.width), H = size_t(l.hidden);
  size_t off = 0;
  auto take = [&](size_t n) {
    const size_t at = off;
    off += n;
    return at;
  };
  l.wte = take(size_t(vocab) * C);
  l.wpe = take(size_t(c.context) * C);
  for (int i = 0; i < c.layers; ++i) {
    BlockSlots s;
    s.ln1_w = take(C);
    s.ln1_b = take(C);
    s.qkv_w = take(3 * C * C);
    s.qkv_b = take(3 * C);
    s.proj_w = take(C * C);
    s.proj_b = take(C);
    s.ln2_w = take(C);
    s.ln2_b = take(C);
    s.fc_w = take(H * C);
    s.fc_b = take(H);
    s.fcproj_w = take(C * H);
    s.fcproj_b = take(C);
    l.blocks.push_back(s);
  }
  l.lnf_w = take(C);
  l.lnf_b = take(C);
  l.head = c.tied ? l.wte : take(size_t(vocab) * C);
  l.param_count = off;
  return l;
}

std::vector<double> init_transformer(const TransformerLayout& l, const TransformerConfig& c, uint64_t seed) {
  std::vector<double> p(l.param_count, 0.0);
  uint64_t stream = 2000;
  auto normal = [&](size_t at, size_t n, double sd) {
    ++stream;
    for (size_t k = 0; k < n; ++k) p[at + k] = static_cast<float>(sd * standard_normal(seed, stream, k));
  };
  auto ones = [&](size_t at) { std::fill_n(p.begin() + at, l.width, 1.0); };
  const size_t C = size_t(l.width), H = size_t(l.hidden);
  const double lin = c.init_scale / std::sqrt(double(C)), resid = 1.0 / std::sqrt(2.0 * double(l.blocks.size()));
  normal(l.wte, size_t(l.vocab) * C, 0.1 * c.init_scale);
  normal(l.wpe, size_t(l.context) * C, 0.1 * c.init_scale);
  for (const BlockSlots& s : l.blocks) {
    ones(s.ln1_w);
    normal(s.qkv_w, 2 * C * C, lin * c.qk_init_scale);  // query and key rows
    normal(s.qkv_w + 2 * C * C, C * C, lin);             // value rows
    normal(s.proj_w, C * C, lin * resid);
    ones(s.ln2_w);
    normal(s.fc_w, H * C, lin);
    normal(s.fcproj_w, C * H, c.init_scale / std::sqrt(double(H)) * resid);
  }
  ones(l.lnf_w);
  if (!l.tied) normal(l.head, size_t(l.vocab) * C, lin);
  return p;
}

double transformer_activation_bytes(const TransformerLayout& l, int rows, double act_bytes, double norm_bytes,
                                    double score_bytes) {
  const double B = rows, T = l.context, C = l.width, H = l.hidden, V = l.vocab, NH = l.heads,
               L = double(l.blocks.size()), BT = B * T;
  // Per block: qkv (3C), its Q, K, V, V^T copies (4C), attention output, resid2 (C each), fc and
  // GELU (H each); resid holds L + 1 streams (C); logits (V).
  const double act = (L + 1) * BT * C + L * BT * (9 * C + 2 * H) + BT * V;
  const double norm = (2 * L + 1) * BT * C;              // ln1, ln2 per block; lnf
  const double scores = L * 2 * B * NH * T * T;           // scores and probabilities
  const double fp32 = (4 * L + 2) * BT + BT * V + BT;     // LayerNorm mean and rstd; softmax; losses
  return act * act_bytes + norm * norm_bytes + scores * score_bytes + fp32 * 4.0;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TransformerConfig, layers, heads, width, context, mlp_ratio, tied, init_scale,
                                   qk_init_scale, outlier_scale, outlier_layer)

nlohmann::json transformer_config_to_json(const TransformerConfig& c) {
  nlohmann::json j = c;
  j["type"] = "transformer";
  return j;
}

TransformerConfig transformer_config_from_json(const nlohmann::json& j) {
  nlohmann::json m = merge_config(transformer_config_to_json(TransformerConfig{}), j, "model");
  if (m["type"] != "transformer")
    throw std::invalid_argument(fmt::format("model.type '{}' is unknown here; allowed: mlp, transformer", m["type"].get<std::string>()));
  m.erase("type");
  const TransformerConfig c = m.get<TransformerConfig>();
  make_transformer_layout(c, 2);  // range checks before any data is made
  return c;
}

}  // namespace precsim

// What precsim.torch computes with: a recipe's linear layer and matrix product (train/recipe_linear.h)
// and the MLP problem of a train config (data, batches, initial weights), so that a PyTorch model can
// start from `precsim train`'s weights and batches.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "precsim/sim/data/data.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/model/layers.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/model/mlp.h"
#include "precsim/sim/model/transformer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_linear.h"
#include "py_common.h"

namespace precsim::py {
namespace {

template <class T>
std::span<const T> cspan(const Array<const T>& a) {
  return {a.data(), a.size()};
}
template <class T>
std::span<T> mspan(const Array<T>& a) {
  return {a.data(), a.size()};
}

// A float32 NumPy array that owns a copy of `v` (FP32 values held in doubles: exact).
nb::ndarray<nb::numpy, float> owned(const std::vector<double>& v, std::vector<size_t> shape) {
  return owned_array(std::vector<float>(v.begin(), v.end()), std::move(shape));
}

nb::dict mlp_problem(nb::handle config, uint64_t seed) {
  const TrainConfig c = train_config_of(config);
  if (c.model_type != ModelKind::kMlp)
    throw std::invalid_argument("model.type '" + std::string(to_string(c.model_type)) + "': only the mlp has a problem here");
  const Dataset d = make_dataset(c.data, seed);
  const MlpLayout l = make_mlp_layout(c.model, d.features, d.outputs);
  const std::vector<double> p = init_mlp(l, c.model, seed);
  nb::dict out;
  const size_t f = size_t(d.features), n = size_t(d.train_count());
  out["task"] = d.task == Task::kClassification ? "classification" : "regression";
  out["x_train"] = owned(d.x_train, {n, f});
  if (d.task == Task::kClassification) {
    out["y_train"] = owned_array(d.y_train, {d.y_train.size()});
  } else {
    out["y_train"] = owned(d.t_train, {n, size_t(d.outputs)});
  }
  nb::list layers;
  for (const auto& s : l.layers) {
    if (s.layernorm || s.batchnorm || s.residual)
      throw std::invalid_argument("model: only plain linear layers and activations have a PyTorch twin here");
    const std::vector<double> w(p.begin() + long(s.w), p.begin() + long(s.w + size_t(s.in) * s.out));
    const std::vector<double> b(p.begin() + long(s.b), p.begin() + long(s.b + size_t(s.out)));
    layers.append(nb::make_tuple(owned(w, {size_t(s.out), size_t(s.in)}), owned(b, {size_t(s.out)})));
  }
  out["layers"] = layers;
  out["batch"] = c.batch;
  out["steps"] = c.steps;
  return out;
}

// A (rows, cols) float32 array of the `count` parameters at `at`.
nb::ndarray<nb::numpy, float> param(const std::vector<double>& p, size_t at, std::vector<size_t> shape) {
  size_t count = 1;
  for (size_t s : shape) count *= s;
  return owned(std::vector<double>(p.begin() + long(at), p.begin() + long(at + count)), std::move(shape));
}

// The transformer's initial parameters by torch name (precsim.torch.TinyGPT's), in layout order.
nb::dict transformer_params(const TransformerLayout& l, const std::vector<double>& p) {
  const size_t C = size_t(l.width), H = size_t(l.hidden), V = size_t(l.vocab);
  nb::dict out;
  out["wte"] = param(p, l.wte, {V, C});
  out["wpe"] = param(p, l.wpe, {size_t(l.context), C});
  for (size_t i = 0; i < l.blocks.size(); ++i) {
    const BlockSlots& s = l.blocks[i];
    const std::string b = "blocks." + std::to_string(i) + ".";
    const std::pair<const char*, std::pair<size_t, std::vector<size_t>>> slots[] = {
        {"ln1.weight", {s.ln1_w, {C}}},       {"ln1.bias", {s.ln1_b, {C}}},
        {"attn.qkv.weight", {s.qkv_w, {3 * C, C}}}, {"attn.qkv.bias", {s.qkv_b, {3 * C}}},
        {"attn.proj.weight", {s.proj_w, {C, C}}},   {"attn.proj.bias", {s.proj_b, {C}}},
        {"ln2.weight", {s.ln2_w, {C}}},       {"ln2.bias", {s.ln2_b, {C}}},
        {"mlp.fc.weight", {s.fc_w, {H, C}}},  {"mlp.fc.bias", {s.fc_b, {H}}},
        {"mlp.proj.weight", {s.fcproj_w, {C, H}}}, {"mlp.proj.bias", {s.fcproj_b, {C}}}};
    for (const auto& [name, slot] : slots) out[(b + name).c_str()] = param(p, slot.first, slot.second);
  }
  out["lnf.weight"] = param(p, l.lnf_w, {C});
  out["lnf.bias"] = param(p, l.lnf_b, {C});
  if (!l.tied) out["head.weight"] = param(p, l.head, {V, C});
  return out;
}

nb::dict transformer_problem(nb::handle config, uint64_t seed) {
  const TrainConfig c = train_config_of(config);
  if (c.model_type != ModelKind::kTransformer)
    throw std::invalid_argument("model.type '" + std::string(to_string(c.model_type)) + "': transformer_problem needs "
                                "model.type transformer");
  const SeqDataset d = make_seq_dataset(c.seq_data, c.transformer.context, seed);
  const TransformerLayout l = make_transformer_layout(c.transformer, d.vocab);
  const size_t rows = size_t(d.train_rows + d.heldout_rows), T = size_t(d.context);
  nb::dict out;
  out["params"] = transformer_params(l, init_transformer(l, c.transformer, seed));
  out["tokens"] = owned_array(d.tokens, {rows, T});
  out["targets"] = owned_array(d.targets, {rows, T});
  out["valid"] = owned_array(d.valid, {rows, T});
  out["loss_mask"] = owned_array(d.loss_mask, {rows, T});
  out["train_rows"] = d.train_rows;
  out["vocab"] = l.vocab;
  out["context"] = l.context;
  out["width"] = l.width;
  out["heads"] = l.heads;
  out["layers"] = int(l.blocks.size());
  out["mlp_ratio"] = c.transformer.mlp_ratio;
  out["tied"] = l.tied;
  out["outlier_scale"] = l.outlier_scale;
  out["batch"] = c.batch;
  out["steps"] = c.steps;
  return out;
}

}  // namespace

void bind_linear(nb::module_& m) {
  nb::class_<RecipeLinear>(m, "RecipeLinear", "A recipe's linear layer and matrix product (train/recipe_linear.h).")
      .def(nb::init<const Recipe&, uint64_t, int>(), nb::arg("recipe"), nb::arg("seed"), nb::arg("layer"))
      .def_prop_ro("name", [](const RecipeLinear& l) { return l.recipe().name; })
      .def("cast_weights", [](RecipeLinear& l, Array<float> v, uint32_t tensor, uint64_t step) {
        nb::gil_scoped_release release;
        l.cast_weights(mspan(v), tensor, step);
      }, nb::arg("v").noconvert(), nb::arg("tensor"), nb::arg("step"))
      .def("forward", [](RecipeLinear& l, Array<const float> x, Array<const float> wc, Array<const float> bc,
                         Array<float> y, int rows, int in, int out, uint64_t step) {
        nb::gil_scoped_release release;
        l.forward(cspan(x), cspan(wc), cspan(bc), mspan(y), rows, in, out, step);
      }, nb::arg("x").noconvert(), nb::arg("wc").noconvert(), nb::arg("bc").noconvert(), nb::arg("y").noconvert(),
         nb::arg("rows"), nb::arg("in_features"), nb::arg("out_features"), nb::arg("step"))
      .def("backward", [](RecipeLinear& l, Array<const float> dy, Array<const float> x, Array<const float> wc,
                          Array<float> dx, Array<float> dw, Array<float> db, int rows, int in, int out, uint64_t step) {
        nb::gil_scoped_release release;
        l.backward(cspan(dy), cspan(x), cspan(wc), mspan(dx), mspan(dw), mspan(db), rows, in, out, step);
      }, nb::arg("dy").noconvert(), nb::arg("x").noconvert(), nb::arg("wc").noconvert(), nb::arg("dx").noconvert(),
         nb::arg("dw").noconvert(), nb::arg("db").noconvert(), nb::arg("rows"), nb::arg("in_features"),
         nb::arg("out_features"), nb::arg("step"))
      .def("product", [](RecipeLinear& l, int pass, Array<const float> a, bool trans_a, Array<const float> b,
                         bool trans_b, Array<float> c, int m_, int n, int k, uint64_t step) {
        if (pass < 0 || pass > 2) throw std::invalid_argument("pass " + std::to_string(pass) + "; allowed: 0, 1, 2");
        if (a.size() != size_t(m_) * k || b.size() != size_t(k) * n || c.size() != size_t(m_) * n)
          throw std::invalid_argument("product: operand sizes do not match m, n, k");
        nb::gil_scoped_release release;
        l.product(static_cast<GemmPass>(pass), a.data(), trans_a, b.data(), trans_b, c.data(), m_, n, k, step);
      }, nb::arg("pass_"), nb::arg("a").noconvert(), nb::arg("trans_a"), nb::arg("b").noconvert(), nb::arg("trans_b"),
         nb::arg("c").noconvert(), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("step"));
  // The MLP trainer's loss: per-row softmax cross-entropy in FP32 (exp and log from the C library
  // in double, rounded once), the batch mean summed in double; its gradient with the trainer's
  // per-row weight fl32(g) / fl32(rows).
  m.def("xent_forward", [](Array<const float> logits, Array<const int32_t> targets, Array<float> probs, int rows,
                           int classes) {
    if (logits.size() != size_t(rows) * classes || probs.size() != logits.size() || targets.size() != size_t(rows))
      throw std::invalid_argument("cross_entropy: logits must be (rows, classes) and targets (rows)");
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets.data()[i] < 0 || targets.data()[i] >= classes)
        throw std::invalid_argument("cross_entropy: target " + std::to_string(targets.data()[i]) + " at row " +
                                    std::to_string(i) + " is out of range; allowed: 0.." + std::to_string(classes - 1));
    std::vector<float> losses(static_cast<size_t>(rows));
    double sum = 0;
    {
      nb::gil_scoped_release release;
      softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows, classes);
      for (float l : losses) sum += double(l);
    }
    return rows > 0 ? sum / rows : 0.0;
  }, nb::arg("logits").noconvert(), nb::arg("targets").noconvert(), nb::arg("probs").noconvert(), nb::arg("rows"),
        nb::arg("classes"));
  m.def("xent_backward", [](Array<const float> probs, Array<const int32_t> targets, double grad, Array<float> dlogits,
                            int rows, int classes) {
    if (probs.size() != size_t(rows) * classes || dlogits.size() != probs.size() || targets.size() != size_t(rows))
      throw std::invalid_argument("cross_entropy backward: shapes do not match");
    const float dloss = static_cast<float>(grad) / static_cast<float>(rows);
    nb::gil_scoped_release release;
    std::fill(dlogits.data(), dlogits.data() + dlogits.size(), 0.0f);
    softmax_xent_backward(dlogits.data(), probs.data(), targets.data(), dloss, rows, classes);
  }, nb::arg("probs").noconvert(), nb::arg("targets").noconvert(), nb::arg("grad"), nb::arg("dlogits").noconvert(),
        nb::arg("rows"), nb::arg("classes"));
  m.def("mlp_problem", &mlp_problem, nb::arg("config"), nb::arg("seed"),
        "The data and initial weights `precsim train` uses for an MLP config and seed.");
  m.def("transformer_problem", &transformer_problem, nb::arg("config"), nb::arg("seed"),
        "The token data, initial weights (by precsim.torch.TinyGPT's parameter names) and sizes `precsim train` "
        "uses for a transformer config and seed.");
  m.def("batch_indices", [](int train_count, int batch, uint64_t seed, uint64_t step) {
    std::vector<int> idx;
    batch_indices(idx, train_count, batch, seed, step);
    return idx;
  }, nb::arg("train_count"), nb::arg("batch"), nb::arg("seed"), nb::arg("step"));
}

}  // namespace precsim::py

// The MLP's forward pass: per layer the linear product of each row group, bias, the rounding of
// the linear output, then for hidden layers [LayerNorm | BatchNorm], activation, [residual], each
// output rounded per row group; last the per-row loss.
#include <algorithm>
#include <span>

#include "precsim/sim/model/layers.h"
#include "precsim/sim/model/linear.h"
#include "precsim/sim/model/mlp_pass.h"

namespace precsim {
namespace {

template <class T>
void resize_acts(MlpActs<T>& a, const MlpLayout& layout, int b) {
  if (b == a.rows) return;
  a.rows = b;
  const size_t n = layout.layers.size();
  for (auto* v : {&a.linear_out, &a.norm_out, &a.mean, &a.rstd, &a.bn_var, &a.act_out}) v->assign(n, {});
  a.layer_in.assign(n + 1, {});
  for (size_t l = 0; l < n; ++l) {
    const auto& s = layout.layers[l];
    a.layer_in[l].resize(size_t(b) * s.in);
    a.linear_out[l].resize(size_t(b) * s.out);
    if (s.layernorm || s.batchnorm) {
      a.norm_out[l].resize(size_t(b) * s.out);
      a.mean[l].resize(s.batchnorm ? s.out : b);  // BatchNorm: per channel; LayerNorm: per row
      a.rstd[l].resize(s.batchnorm ? s.out : b);
      a.bn_var[l].resize(s.batchnorm ? s.out : 0);
    }
    if (s.hidden) a.act_out[l].resize(size_t(b) * s.out);
  }
  a.layer_in[n].resize(size_t(b) * layout.output);
  a.losses.resize(b);
  a.probs.resize(size_t(b) * layout.output);
}

// Each row group's slice of v ((rows, width)) rounded with its group's key.
template <class T>
void round_rows(Numerics<T>& nx, RoundPoint point, int layer, MlpForward slot, std::vector<T>& v, size_t width,
                int rows) {
  const int groups = nx.row_groups();
  const size_t n = size_t(rows) / size_t(groups) * width;
  for (int g = 0; g < groups; ++g)
    nx.round(RoundAt{point, layer, uint32_t(slot), g}, std::span<T>(v.data() + g * n, n));
}

// BatchNorm: batch statistics in training mode, updating the running ones; the running ones in
// evaluation. With several row groups (SyncBatchNorm) each group's mean and variance are combined
// into those of all the rows, in group order.
template <class T>
void batchnorm(MlpActs<T>& a, const LinearSlots& s, size_t l, const T* p, BatchNormRunning<T> bn, int groups) {
  T* rm = bn.mean + s.bn_stats;
  T* rv = bn.var + s.bn_stats;
  const int rows = a.rows;
  if (!bn.train) {
    batchnorm_inference(a.norm_out[l].data(), a.linear_out[l].data(), p + s.ln_w, p + s.ln_b, rm, rv, rows, s.out);
    return;
  }
  if (groups == 1) {
    batchnorm_forward(a.norm_out[l].data(), a.mean[l].data(), a.bn_var[l].data(), a.rstd[l].data(),
                      a.linear_out[l].data(), p + s.ln_w, p + s.ln_b, rows, s.out);
  } else {
    const int gr = rows / groups;
    const size_t c = size_t(s.out);
    a.bn_group_stats.resize(2 * size_t(groups) * c);  // (G,C) means, then (G,C) variances
    T* gm = a.bn_group_stats.data();
    T* gv = gm + size_t(groups) * c;
    for (int g = 0; g < groups; ++g)
      batchnorm_stats(gm + g * c, gv + g * c, a.linear_out[l].data() + size_t(g) * gr * c, gr, s.out);
    const std::vector<int> counts(size_t(groups), gr);
    batchnorm_combine_stats(a.mean[l].data(), a.bn_var[l].data(), gm, gv, counts.data(), groups, s.out);
    batchnorm_normalize(a.norm_out[l].data(), a.rstd[l].data(), a.linear_out[l].data(), p + s.ln_w, p + s.ln_b,
                        a.mean[l].data(), a.bn_var[l].data(), rows, s.out);
  }
  if (!bn.update) return;
  const T mom = T(0.1), unbias = rows > 1 ? T(rows) / T(rows - 1) : T(1);
  for (int i = 0; i < s.out; ++i) {
    rm[i] = (T(1) - mom) * rm[i] + mom * a.mean[l][i];
    rv[i] = (T(1) - mom) * rv[i] + mom * a.bn_var[l][i] * unbias;
  }
}

// Layer l's output h = [layer_in +] act([norm](u)) into layer_in[l + 1], u the rounded linear output.
template <class T>
void hidden_forward(MlpActs<T>& a, const MlpLayout& layout, size_t l, const T* p, BatchNormRunning<T> bn,
                    Numerics<T>& nx) {
  const auto& s = layout.layers[l];
  const int li = int(l), rows = a.rows;
  const size_t cnt = size_t(rows) * s.out;
  const T* u = a.linear_out[l].data();
  if (s.layernorm || s.batchnorm) {
    if (s.layernorm)
      layernorm_forward(a.norm_out[l].data(), a.mean[l].data(), a.rstd[l].data(), u, p + s.ln_w, p + s.ln_b, rows,
                        s.out);
    else
      batchnorm(a, s, l, p, bn, nx.row_groups());
    round_rows(nx, RoundPoint::kNormOut, li, MlpForward::kNormOut, a.norm_out[l], s.out, rows);
    u = a.norm_out[l].data();
  }
  if (layout.activation == Activation::kRelu) relu_forward(a.act_out[l].data(), u, cnt);
  else gelu_forward(a.act_out[l].data(), u, cnt);
  round_rows(nx, RoundPoint::kActivation, li, MlpForward::kActivation, a.act_out[l], s.out, rows);
  if (s.residual) {
    residual_forward(a.layer_in[l + 1].data(), a.layer_in[l].data(), a.act_out[l].data(), cnt);
    round_rows(nx, RoundPoint::kActivation, li, MlpForward::kResidual, a.layer_in[l + 1], s.out, rows);
  } else {
    std::copy(a.act_out[l].begin(), a.act_out[l].end(), a.layer_in[l + 1].begin());
  }
}

}  // namespace

template <class T>
void mlp_forward(MlpActs<T>& a, const T* p, const MlpLayout& layout, Task task, const BatchView& bv,
                 BatchNormRunning<T> bn, Numerics<T>& nx) {
  resize_acts(a, layout, bv.rows);
  const size_t n = layout.layers.size();
  const int rows = a.rows, groups = nx.row_groups(), gr = rows / groups;
  for (size_t i = 0; i < a.layer_in[0].size(); ++i) a.layer_in[0][i] = static_cast<T>(bv.x[i]);
  for (size_t l = 0; l < n; ++l) {
    const auto& s = layout.layers[l];
    for (int g = 0; g < groups; ++g)
      linear_forward(a.linear_out[l].data() + size_t(g) * gr * s.out, a.layer_in[l].data() + size_t(g) * gr * s.in,
                     p + s.w, p + s.b, gr, s.in, s.out, LinearAt{0, int(l), g, LinearOperands::kStored}, nx);
    round_rows(nx, RoundPoint::kActivation, int(l), MlpForward::kLinearOut, a.linear_out[l], s.out, rows);
    if (s.hidden) hidden_forward(a, layout, l, p, bn, nx);
    else std::copy(a.linear_out[l].begin(), a.linear_out[l].end(), a.layer_in[l + 1].begin());
  }
  const T* out = a.layer_in[n].data();
  if (task == Task::kClassification) {
    a.labels.assign(bv.labels, bv.labels + rows);
    softmax_xent_forward(a.losses.data(), a.probs.data(), out, a.labels.data(), rows, layout.output);
  } else {
    a.targets.resize(size_t(rows) * layout.output);
    for (size_t i = 0; i < a.targets.size(); ++i) a.targets[i] = static_cast<T>(bv.targets[i]);
    mse_forward(a.losses.data(), out, a.targets.data(), rows, layout.output);
  }
}

template void mlp_forward<float>(MlpActs<float>&, const float*, const MlpLayout&, Task, const BatchView&,
                                 BatchNormRunning<float>, Numerics<float>&);
template void mlp_forward<double>(MlpActs<double>&, const double*, const MlpLayout&, Task, const BatchView&,
                                  BatchNormRunning<double>, Numerics<double>&);

}  // namespace precsim

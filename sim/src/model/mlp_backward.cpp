// The MLP's backward pass: the loss gradient of each row, then per layer from the top the linear
// layer's backward of each row group (its weight and bias gradients rounded with the group's key),
// the input gradient with the residual path, the activation's and the normalisation's backward.
#include <span>

#include "precsim/sim/model/layers.h"
#include "precsim/sim/model/linear.h"
#include "precsim/sim/model/mlp_pass.h"

namespace precsim {
namespace {

// Each row group's slice of v ((rows, width)) rounded with its group's key.
template <class T>
void round_grad_rows(Numerics<T>& nx, int layer, MlpBackward slot, std::vector<T>& v, size_t width, int rows) {
  const int groups = nx.row_groups();
  const size_t n = size_t(rows) / size_t(groups) * width;
  for (int g = 0; g < groups; ++g)
    nx.round(RoundAt{RoundPoint::kActGrad, layer, uint32_t(slot), g}, std::span<T>(v.data() + g * n, n));
}

template <class T>
void round_param_grad(Numerics<T>& nx, int layer, MlpBackward slot, int group, std::vector<T>& g, size_t at, size_t n) {
  nx.round(RoundAt{RoundPoint::kWeightGrad, layer, uint32_t(slot), group}, std::span<T>(g.data() + at, n));
}

// dlinear_out = d(loss) / d(output), row by row (each row with its own weight), rounded.
template <class T>
void loss_backward(MlpActs<T>& a, const MlpLayout& layout, Task task, const T* row_dloss, Numerics<T>& nx) {
  const size_t o = size_t(layout.output), n = layout.layers.size();
  a.dlinear_out.assign(size_t(a.rows) * o, T(0));
  for (int b = 0; b < a.rows; ++b) {
    T* d = a.dlinear_out.data() + b * o;
    if (task == Task::kClassification)
      softmax_xent_backward(d, a.probs.data() + b * o, a.labels.data() + b, row_dloss[b], 1, layout.output);
    else
      mse_backward(d, a.layer_in[n].data() + b * o, a.targets.data() + b * o, row_dloss[b], 1, layout.output);
  }
  round_grad_rows(nx, int(n), MlpBackward::kLossGrad, a.dlinear_out, o, a.rows);
}

// a.dlinear_out += the normalisation's input gradient from a.dact_in; each group's weight and bias
// gradients. A BatchNorm over several groups (SyncBatchNorm) reduces the groups' sums of weight dy
// and of weight dy xhat across the groups first, and every group applies the totals over all rows.
template <class T>
void norm_backward(std::vector<std::vector<T>>& gg, MlpActs<T>& a, const LinearSlots& p, size_t l, const T* params,
                   Numerics<T>& nx) {
  const int rows = a.rows, groups = nx.row_groups(), gr = rows / groups;
  const size_t c = size_t(p.out);
  const T* w = params + p.ln_w;
  auto at = [&](std::vector<T>& v, int g) { return v.data() + size_t(g) * gr * c; };
  if (p.layernorm) {  // per row: mean and rstd are (rows)
    for (int g = 0; g < groups; ++g)
      layernorm_backward(at(a.dlinear_out, g), gg[g].data() + p.ln_w, gg[g].data() + p.ln_b, at(a.dact_in, g),
                         at(a.linear_out[l], g), w, a.mean[l].data() + size_t(g) * gr,
                         a.rstd[l].data() + size_t(g) * gr, gr, p.out);
    return;
  }
  if (groups == 1) {
    batchnorm_backward(a.dlinear_out.data(), gg[0].data() + p.ln_w, gg[0].data() + p.ln_b, a.dact_in.data(),
                       a.linear_out[l].data(), w, a.mean[l].data(), a.rstd[l].data(), rows, p.out);
    return;
  }
  a.bn_group_sums.resize(size_t(groups));
  for (int g = 0; g < groups; ++g) {
    a.bn_group_sums[g].resize(2 * c);
    batchnorm_backward_sums(a.bn_group_sums[g].data(), a.bn_group_sums[g].data() + c, at(a.dact_in, g),
                            at(a.linear_out[l], g), w, a.mean[l].data(), a.rstd[l].data(), gr, p.out);
  }
  nx.reduce_across_groups(a.bn_total_sums, a.bn_group_sums);
  for (int g = 0; g < groups; ++g)
    batchnorm_backward_apply(at(a.dlinear_out, g), gg[g].data() + p.ln_w, gg[g].data() + p.ln_b, at(a.dact_in, g),
                             at(a.linear_out[l], g), w, a.mean[l].data(), a.rstd[l].data(), a.bn_total_sums.data(),
                             a.bn_total_sums.data() + c, rows, gr, p.out);
}

// From d(layer li-1's output h) in a.dlayer_in to d(its linear output) in a.dlinear_out, through
// the activation and the normalisation; h's residual path saved in a.dresidual.
template <class T>
void hidden_backward(std::vector<std::vector<T>>& gg, MlpActs<T>& a, const MlpLayout& layout, size_t li,
                     const T* params, Numerics<T>& nx) {
  const auto& p = layout.layers[li - 1];
  const int id = int(li), rows = a.rows;
  if (p.residual) a.dresidual = a.dlayer_in;
  const size_t cnt = size_t(rows) * p.out;
  const T* u = p.layernorm || p.batchnorm ? a.norm_out[li - 1].data() : a.linear_out[li - 1].data();
  a.dact_in.assign(cnt, T(0));
  if (layout.activation == Activation::kRelu) relu_backward(a.dact_in.data(), u, a.dlayer_in.data(), cnt);
  else gelu_backward(a.dact_in.data(), u, a.dlayer_in.data(), cnt);
  round_grad_rows(nx, id, MlpBackward::kActivationGrad, a.dact_in, p.out, rows);
  if (!(p.layernorm || p.batchnorm)) {
    a.dlinear_out.swap(a.dact_in);
    return;
  }
  a.dlinear_out.assign(cnt, T(0));
  norm_backward(gg, a, p, li - 1, params, nx);
  round_grad_rows(nx, id, MlpBackward::kNormInputGrad, a.dlinear_out, p.out, rows);
  for (int g = 0; g < nx.row_groups(); ++g) {
    round_param_grad(nx, id, MlpBackward::kNormWeightGrad, g, gg[g], p.ln_w, p.out);
    round_param_grad(nx, id, MlpBackward::kNormBiasGrad, g, gg[g], p.ln_b, p.out);
  }
}

}  // namespace

template <class T>
void mlp_backward(std::vector<std::vector<T>>& gg, MlpActs<T>& a, const T* params, const MlpLayout& layout, Task task,
                  const T* row_dloss, Numerics<T>& nx) {
  const size_t n = layout.layers.size();
  const int rows = a.rows, groups = nx.row_groups(), gr = rows / groups;
  gg.resize(size_t(groups));
  for (auto& g : gg) g.assign(layout.param_count, T(0));
  loss_backward(a, layout, task, row_dloss, nx);
  bool have_res = false;  // the layer's output h = layer_in + act(...): dresidual carries dh to its input
  for (size_t li = n; li-- > 0;) {
    const auto& s = layout.layers[li];
    const int id = int(li);
    nx.observe_activation_grads(a.dlinear_out);
    if (li > 0) a.dlayer_in.assign(size_t(rows) * s.in, T(0));
    for (int g = 0; g < groups; ++g) {
      T* dinp = li > 0 ? a.dlayer_in.data() + size_t(g) * gr * s.in : nullptr;
      linear_backward(dinp, gg[g].data() + s.w, gg[g].data() + s.b, a.dlinear_out.data() + size_t(g) * gr * s.out,
                      a.layer_in[li].data() + size_t(g) * gr * s.in, params + s.w, gr, s.in, s.out,
                      LinearAt{0, id, g, LinearOperands::kStored}, nx);
      round_param_grad(nx, id, MlpBackward::kWeightGrad, g, gg[g], s.w, size_t(s.in) * s.out);
      round_param_grad(nx, id, MlpBackward::kBiasGrad, g, gg[g], s.b, size_t(s.out));
    }
    if (li == 0) break;
    if (have_res)
      for (size_t i = 0; i < a.dlayer_in.size(); ++i) a.dlayer_in[i] += a.dresidual[i];
    round_grad_rows(nx, id, MlpBackward::kInputGrad, a.dlayer_in, s.in, rows);
    have_res = layout.layers[li - 1].residual;
    hidden_backward(gg, a, layout, li, params, nx);
  }
}

template void mlp_backward<float>(std::vector<std::vector<float>>&, MlpActs<float>&, const float*, const MlpLayout&,
                                  Task, const float*, Numerics<float>&);
template void mlp_backward<double>(std::vector<std::vector<double>>&, MlpActs<double>&, const double*,
                                   const MlpLayout&, Task, const double*, Numerics<double>&);

}  // namespace precsim

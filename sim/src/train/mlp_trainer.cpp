#include "precsim/sim/train/mlp_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/model/layers.h"
#include "precsim/sim/train/recipe_gemm.h"
#include "precsim/sim/train/sr_keys.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {
namespace {

using sr_keys::MlpBackward;
using sr_keys::MlpForward;

template <class T>
std::span<T> sp(std::vector<T>& v, size_t off, size_t n) {
  return std::span<T>(v.data() + off, n);
}

}  // namespace

template <class T>
RunState<T> RunState<T>::clone() const {
  RunState c = *this;
  for (auto& d : c.delayed)
    if (d) d = std::make_shared<DelayedScaling>(*d);
  return c;
}

template <class T>
struct Trainer<T>::Impl {
  MlpLayout layout;
  const Recipe* recipe;
  OptimizerConfig opt;
  Task task;
  uint64_t seed;
  int64_t total_steps;
  std::array<RecipeGemm, kGemmPasses> gemms;  // by GemmPass (a recipe's trainer only)
  std::shared_ptr<GemmExecutor> backend;       // null: the emulated gemm()

  // Workspace, sized for the current batch.
  int rows = 0;
  std::vector<T> cast_w, grads;
  std::vector<std::vector<T>> layer_in, linear_out, norm_out, mean, rstd, bn_var, act_out;  // per layer
  bool update_running = true;  // this forward updates BatchNorm running statistics (worker 0's)
  std::vector<T> losses, probs, targets, act_grads;
  // Backward: d(linear output), d(layer input), d(activation input), d(residual stream).
  std::vector<T> dlinear_out, dlayer_in, dact_in, dresidual;
  std::vector<int32_t> labels;
  RunState<T>* cur = nullptr;  // the state being stepped (delayed-scaling histories)
  GradientSplit<T> split;
  std::vector<ParamRange> norm_params;  // kept in FP32 under autocast
  std::vector<T> row_dloss;             // per-row loss gradients of one forward
  // Row groups of one forward: one, or under SyncBatchNorm one per worker (worker w's micro-batch
  // m), each with its own GEMM calls, stochastic-rounding key and gradient (group_grads).
  std::vector<std::vector<T>> group_grads, bn_group_sums;
  std::vector<T> bn_group_stats, bn_total_sums;
  std::vector<double> gathered_x, gathered_targets;
  std::vector<int32_t> gathered_labels;

  Impl(const MlpLayout& l, const Recipe* r, const OptimizerConfig& o, Task t, uint64_t s, int64_t total)
      : layout(l), recipe(r), opt(o), task(t), seed(s), total_steps(total),
        split(param_tensors(l), l.param_count, r == nullptr), norm_params(norm_param_ranges(l)) {}

  // The parameter tensors in parameter order (the DDP bucket units).
  static std::vector<ParamRange> param_tensors(const MlpLayout& l) {
    std::vector<ParamRange> t;
    for (const auto& s : l.layers) {
      t.push_back({s.w, size_t(s.in) * s.out});
      t.push_back({s.b, size_t(s.out)});
      if (s.layernorm || s.batchnorm) {
        t.push_back({s.ln_w, size_t(s.out)});
        t.push_back({s.ln_b, size_t(s.out)});
      }
    }
    return t;
  }
  // layer_norm (and here batch_norm) runs in FP32 with the FP32 parameters (autocast list).
  static std::vector<ParamRange> norm_param_ranges(const MlpLayout& l) {
    std::vector<ParamRange> v;
    for (const auto& s : l.layers)
      if (s.layernorm || s.batchnorm) {
        v.push_back({s.ln_w, size_t(s.out)});
        v.push_back({s.ln_b, size_t(s.out)});
      }
    return v;
  }

  bool exact() const { return recipe == nullptr; }

  void round(std::span<T> v, const TensorFormat& tf, Role role, uint32_t tensor, uint64_t step, StepStats* st) {
    if (!exact()) round_role(v, tf, role, seed, step, tensor, st);
  }

  // Each row group's slice of v ((rows, width)) rounded with its group's key.
  void round_rows(std::vector<T>& v, size_t width, const TensorFormat& tf, Role role, uint32_t tensor,
                  std::span<const uint64_t> keys, StepStats* st) {
    const size_t n = size_t(rows) / keys.size() * width;
    for (size_t g = 0; g < keys.size(); ++g) round(sp(v, g * n, n), tf, role, tensor, keys[g], st);
  }

  void resize(int b) {
    if (b == rows) return;
    rows = b;
    const size_t n = layout.layers.size();
    layer_in.assign(n + 1, {});
    linear_out.assign(n, {});
    norm_out.assign(n, {});
    mean.assign(n, {});
    rstd.assign(n, {});
    bn_var.assign(n, {});
    act_out.assign(n, {});
    for (size_t l = 0; l < n; ++l) {
      const auto& s = layout.layers[l];
      layer_in[l].resize(size_t(b) * s.in);
      linear_out[l].resize(size_t(b) * s.out);
      if (s.layernorm || s.batchnorm) {
        norm_out[l].resize(size_t(b) * s.out);
        mean[l].resize(s.batchnorm ? s.out : b);  // BatchNorm: per channel; LayerNorm: per row
        rstd[l].resize(s.batchnorm ? s.out : b);
        bn_var[l].resize(s.batchnorm ? s.out : 0);
      }
      if (s.hidden) act_out[l].resize(size_t(b) * s.out);
    }
    layer_in[n].resize(size_t(b) * layout.output);
    losses.resize(b);
    probs.resize(size_t(b) * layout.output);
  }

  // C = op(A) op(B) through the GEMM emulation, each operand quantized along the reduction
  // dimension from its high-precision source. a is (m,k) or, with trans_a, stored (k,m); b is
  // (k,n) or, with trans_b, stored (n,k).
  void gemm_op(GemmPass pass, int layer, T* c, const T* a, bool trans_a, const T* b, bool trans_b, int m, int n, int k,
               uint64_t step, StepStats* st) {
    GemmArgs args;
    args.m = m;
    args.n = n;
    args.k = k;
    args.trans_a = trans_a;
    args.trans_b = trans_b;
    // Small products run on one thread: forking costs more than it saves (results never depend on it).
    if (int64_t(m) * n * k < (int64_t{1} << 18)) args.threads = 1;
    if constexpr (std::is_same_v<T, double>) {
      gemm_f64(args, a, b, c);
    } else {
      const size_t slot = sr_keys::mlp_delayed_slot(layer, pass, 0);
      if (cur->delayed.size() < slot + 2) cur->delayed.resize(slot + 2);
      const uint32_t role = uint32_t(gemm_operand_role(pass));
      OperandKeys keys;
      keys.a = SrKey{seed, step, sr_keys::mlp_gemm(layer, pass, 0), role};
      keys.b = SrKey{seed, step, sr_keys::mlp_gemm(layer, pass, 1), role};
      keys.delayed_a = &cur->delayed[slot];
      keys.delayed_b = &cur->delayed[slot + 1];
      gemms[size_t(pass)].run(args, 1, a, b, c, keys, st, backend.get());
    }
  }

  // BatchNorm: batch statistics in training mode, updating the running ones (PyTorch: momentum 0.1,
  // unbiased variance); the running ones in evaluation. With several row groups (SyncBatchNorm)
  // each group's mean and variance are combined into those of all the rows, in group order.
  void batchnorm(size_t l, bool train, int groups) {
    const auto& s = layout.layers[l];
    T* rm = cur->bn_mean.data() + s.bn_stats;
    T* rv = cur->bn_var.data() + s.bn_stats;
    if (!train) {
      batchnorm_inference(norm_out[l].data(), linear_out[l].data(), cast_w.data() + s.ln_w, cast_w.data() + s.ln_b, rm, rv, rows, s.out);
      return;
    }
    if (groups == 1) {
      batchnorm_forward(norm_out[l].data(), mean[l].data(), bn_var[l].data(), rstd[l].data(), linear_out[l].data(),
                        cast_w.data() + s.ln_w, cast_w.data() + s.ln_b, rows, s.out);
    } else {
      const int gr = rows / groups;
      const size_t c = size_t(s.out);
      bn_group_stats.resize(2 * size_t(groups) * c);  // (G,C) means, then (G,C) variances
      T* gm = bn_group_stats.data();
      T* gv = gm + size_t(groups) * c;
      for (int g = 0; g < groups; ++g)
        batchnorm_stats(gm + g * c, gv + g * c, linear_out[l].data() + size_t(g) * gr * c, gr, s.out);
      const std::vector<int> counts(size_t(groups), gr);
      batchnorm_combine_stats(mean[l].data(), bn_var[l].data(), gm, gv, counts.data(), groups, s.out);
      batchnorm_normalize(norm_out[l].data(), rstd[l].data(), linear_out[l].data(), cast_w.data() + s.ln_w, cast_w.data() + s.ln_b,
                          mean[l].data(), bn_var[l].data(), rows, s.out);
    }
    if (!update_running) return;
    const T mom = T(0.1), unbias = rows > 1 ? T(rows) / T(rows - 1) : T(1);
    for (int i = 0; i < s.out; ++i) {
      rm[i] = (T(1) - mom) * rm[i] + mom * mean[l][i];
      rv[i] = (T(1) - mom) * rv[i] + mom * bn_var[l][i] * unbias;
    }
  }

  // keys[g]: the stochastic-rounding step key of row group g (the rows split evenly).
  void forward(const BatchView& bv, std::span<const uint64_t> keys, bool train, StepStats* st) {
    resize(bv.rows);
    const size_t n = layout.layers.size(), groups = keys.size();
    const int gr = rows / int(groups);
    const TensorFormat af = recipe ? recipe->activations : TensorFormat{};
    for (size_t i = 0; i < layer_in[0].size(); ++i) layer_in[0][i] = static_cast<T>(bv.x[i]);
    for (size_t l = 0; l < n; ++l) {
      const auto& s = layout.layers[l];
      auto id = [&](MlpForward p) { return sr_keys::mlp_forward(int(l), p); };
      const size_t cnt = size_t(rows) * s.out;
      for (size_t g = 0; g < groups; ++g)
        gemm_op(GemmPass::kForward, int(l), linear_out[l].data() + g * gr * s.out, layer_in[l].data() + g * gr * s.in, false, cast_w.data() + s.w, true,
                gr, s.out, s.in, keys[g], st);
      bias_forward(linear_out[l].data(), cast_w.data() + s.b, rows, s.out);
      round_rows(linear_out[l], s.out, af, Role::kActivations, id(MlpForward::kLinearOut), keys, st);
      if (!s.hidden) {
        std::copy(linear_out[l].begin(), linear_out[l].end(), layer_in[l + 1].begin());
        continue;
      }
      const T* u = linear_out[l].data();
      if (s.layernorm || s.batchnorm) {
        if (s.layernorm)
          layernorm_forward(norm_out[l].data(), mean[l].data(), rstd[l].data(), linear_out[l].data(), cast_w.data() + s.ln_w,
                            cast_w.data() + s.ln_b, rows, s.out);
        else
          batchnorm(l, train, int(groups));
        if (recipe && !recipe->autocast) round_rows(norm_out[l], s.out, recipe->activations, Role::kActivations, id(MlpForward::kNormOut), keys, st);
        u = norm_out[l].data();
      }
      if (layout.activation == Activation::kRelu) relu_forward(act_out[l].data(), u, cnt);
      else gelu_forward(act_out[l].data(), u, cnt);
      round_rows(act_out[l], s.out, af, Role::kActivations, id(MlpForward::kActivation), keys, st);
      if (s.residual) {
        residual_forward(layer_in[l + 1].data(), layer_in[l].data(), act_out[l].data(), cnt);
        round_rows(layer_in[l + 1], s.out, af, Role::kActivations, id(MlpForward::kResidual), keys, st);
      } else {
        std::copy(act_out[l].begin(), act_out[l].end(), layer_in[l + 1].begin());
      }
    }
    const T* logits = layer_in[n].data();
    if (task == Task::kClassification) {
      labels.assign(bv.labels, bv.labels + rows);
      softmax_xent_forward(losses.data(), probs.data(), logits, labels.data(), rows, layout.output);
    } else {
      targets.resize(size_t(rows) * layout.output);
      for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<T>(bv.targets[i]);
      mse_forward(losses.data(), logits, targets.data(), rows, layout.output);
    }
  }

  // The rows of the given parts (mb rows each) as one batch: a view into b for one part, else a copy.
  BatchView gather_parts(const BatchView& b, std::span<const int> parts, int mb) {
    BatchView v;
    v.rows = mb * int(parts.size());
    if (parts.size() == 1) {
      const size_t first = size_t(parts[0]) * mb;
      v.x = b.x + first * layout.input;
      if (b.labels) v.labels = b.labels + first;
      if (b.targets) v.targets = b.targets + first * layout.output;
      return v;
    }
    gathered_x.clear();
    gathered_labels.clear();
    gathered_targets.clear();
    for (const int p : parts) {
      const size_t first = size_t(p) * mb, last = first + mb;
      gathered_x.insert(gathered_x.end(), b.x + first * layout.input, b.x + last * layout.input);
      if (b.labels) gathered_labels.insert(gathered_labels.end(), b.labels + first, b.labels + last);
      if (b.targets) gathered_targets.insert(gathered_targets.end(), b.targets + first * layout.output, b.targets + last * layout.output);
    }
    v.x = gathered_x.data();
    if (b.labels) v.labels = gathered_labels.data();
    if (b.targets) v.targets = gathered_targets.data();
    return v;
  }

  // Forward and backward of every micro-batch of every worker, accumulation, all-reduce: grads
  // holds the all-reduced (still loss-scaled) gradient. Returns the loss of the global batch.
  double split_gradient(const BatchView& b, uint64_t step, float scale, StepStats& st) {
    const int mb = split.part_rows(b.rows), parts = split.parts();
    const int w_count = split.parallel().workers, n_count = split.accumulation().micro_batches;
    double n_total = 0, loss_sum = 0;
    for (int i = 0; i < b.rows; ++i) n_total += b.items ? b.items[i] : 1.0;
    split.begin();
    // One forward per micro-batch of each worker (part w N + m, in order); under SyncBatchNorm one
    // per micro-batch index m for all workers at once, worker w's micro-batch as row group w.
    const bool sync = split.parallel().batchnorm == BatchNormStats::kSync && w_count > 1 && layout.bn_channels > 0;
    const int groups = sync ? w_count : 1;
    std::vector<int> part(static_cast<size_t>(groups));
    std::vector<uint64_t> keys(static_cast<size_t>(groups));
    row_dloss.resize(size_t(groups) * mb);
    for (int f = 0; f < parts / groups; ++f) {
      for (int g = 0; g < groups; ++g) {
        part[g] = sync ? g * n_count + f : f;
        keys[g] = sr_keys::part_step(step, part[g]);
      }
      // DDP broadcasts rank 0's buffers; SyncBatchNorm's statistics are every rank's.
      update_running = sync || part[0] < n_count;
      forward(gather_parts(b, part, mb), keys, true, &st);
      for (int g = 0; g < groups; ++g) add_row_losses(loss_sum, b, part[g], g, mb, n_total, scale);
      backward(row_dloss.data(), keys, &st);
      if (split.single_part_is_final()) {  // grads is final
        update_running = true;
        return n_total > 0 ? loss_sum / n_total : 0.0;
      }
      for (int g = 0; g < groups; ++g) {
        if (groups > 1) grads.swap(group_grads[g]);
        split.accumulate(part[g], grads, seed, step, &st);
      }
    }
    update_running = true;
    split.allreduce(grads, st);
    return n_total > 0 ? loss_sum / n_total : 0.0;
  }

  // Row group g (part `part` of b, mb rows) after its forward: adds its items-weighted row losses
  // to loss_sum, row by row (the order of the batch's sum), and sets row_dloss of its rows, the loss
  // each row's gradient comes from with the averaging's division D undone in advance (items_i x D /
  // loss_denominator).
  void add_row_losses(double& loss_sum, const BatchView& b, int part, int g, int mb, double n_total, float scale) {
    auto items = [&](int row) { return b.items ? b.items[row] : 1.0; };
    const int first = part * mb;
    double n_mb = 0;
    for (int i = 0; i < mb; ++i) {
      loss_sum += items(first + i) * static_cast<double>(losses[size_t(g) * mb + i]);
      n_mb += items(first + i);
    }
    const double divisor = average_divisor(split.parallel());
    const double den = loss_denominator(split.accumulation(), n_total, split.parts(), n_mb);
    for (int i = 0; i < mb; ++i)
      row_dloss[size_t(g) * mb + i] =
          den > 0 ? static_cast<T>(double(scale) * items(first + i) * divisor) / static_cast<T>(den) : T(0);
  }

  void cast(const RunState<T>& s, uint64_t step, StepStats* st) {
    cast_weights(cast_w, s.weights, recipe, norm_params, seed, step, st);
  }

  // row_dloss[b]: d(scaled loss) / d(loss of row b). Row group g's parameter gradient goes to
  // group_grads[g]; with one group it ends in grads.
  void backward(const T* row_dloss, std::span<const uint64_t> keys, StepStats* st) {
    const size_t n = layout.layers.size(), groups = keys.size();
    const int gr = rows / int(groups);
    const TensorFormat ag = recipe ? recipe->activation_grads : TensorFormat{};
    const TensorFormat wg = recipe ? recipe->weight_grads : TensorFormat{};
    group_grads.resize(groups);
    for (auto& g : group_grads) g.assign(layout.param_count, T(0));
    act_grads.clear();
    const size_t o = size_t(layout.output);
    dlinear_out.assign(size_t(rows) * o, T(0));
    for (int b = 0; b < rows; ++b) {  // rows are independent: one call per row with its own weight
      if (task == Task::kClassification)
        softmax_xent_backward(dlinear_out.data() + b * o, probs.data() + b * o, labels.data() + b, row_dloss[b], 1, layout.output);
      else
        mse_backward(dlinear_out.data() + b * o, layer_in[n].data() + b * o, targets.data() + b * o, row_dloss[b], 1, layout.output);
    }
    round_rows(dlinear_out, o, ag, Role::kActivationGrads, sr_keys::kLossGrad, keys, st);
    bool have_res = false;
    for (size_t li = n; li-- > 0;) {
      const auto& s = layout.layers[li];
      auto id = [&](MlpBackward p) { return sr_keys::mlp_backward(int(li), p); };
      act_grads.insert(act_grads.end(), dlinear_out.begin(), dlinear_out.end());
      for (size_t g = 0; g < groups; ++g) {
        // dW = dlinear_out^T layer_in: A = dlinear_out stored (rows,out) transposed, B = layer_in (rows,in); K = rows.
        gemm_op(GemmPass::kWgrad, int(li), group_grads[g].data() + s.w, dlinear_out.data() + g * gr * s.out, true,
                layer_in[li].data() + g * gr * s.in, false, s.out, s.in, gr, keys[g], st);
        round(sp(group_grads[g], s.w, size_t(s.in) * s.out), wg, Role::kWeightGrads, id(MlpBackward::kWeightGrad), keys[g], st);
        bias_backward(group_grads[g].data() + s.b, dlinear_out.data() + g * gr * s.out, gr, s.out);
        round(sp(group_grads[g], s.b, s.out), wg, Role::kWeightGrads, id(MlpBackward::kBiasGrad), keys[g], st);
      }
      if (li == 0) break;
      // dX = dlinear_out W: A = dlinear_out (rows,out), B = W stored (out,layer_in); K = out.
      const auto& p = layout.layers[li - 1];
      dlayer_in.assign(size_t(rows) * s.in, T(0));
      for (size_t g = 0; g < groups; ++g)
        gemm_op(GemmPass::kDgrad, int(li), dlayer_in.data() + g * gr * s.in, dlinear_out.data() + g * gr * s.out, false, cast_w.data() + s.w,
                false, gr, s.in, s.out, keys[g], st);
      if (have_res)
        for (size_t i = 0; i < dlayer_in.size(); ++i) dlayer_in[i] += dresidual[i];
      round_rows(dlayer_in, s.in, ag, Role::kActivationGrads, id(MlpBackward::kInputGrad), keys, st);
      // Layer li-1's output h = [layer_in +] act_out(u): dresidual carries dh to its input.
      have_res = p.residual;
      if (have_res) dresidual = dlayer_in;
      const size_t cnt = size_t(rows) * p.out;
      const T* u = p.layernorm || p.batchnorm ? norm_out[li - 1].data() : linear_out[li - 1].data();
      dact_in.assign(cnt, T(0));
      if (layout.activation == Activation::kRelu) relu_backward(dact_in.data(), u, dlayer_in.data(), cnt);
      else gelu_backward(dact_in.data(), u, dlayer_in.data(), cnt);
      round_rows(dact_in, p.out, ag, Role::kActivationGrads, id(MlpBackward::kActivationGrad), keys, st);
      if (p.layernorm || p.batchnorm) {
        dlinear_out.assign(cnt, T(0));
        norm_backward(li - 1, int(groups));
        round_rows(dlinear_out, p.out, ag, Role::kActivationGrads, id(MlpBackward::kNormInputGrad), keys, st);
        for (size_t g = 0; g < groups; ++g) {
          round(sp(group_grads[g], p.ln_w, p.out), wg, Role::kWeightGrads, id(MlpBackward::kNormWeightGrad), keys[g], st);
          round(sp(group_grads[g], p.ln_b, p.out), wg, Role::kWeightGrads, id(MlpBackward::kNormBiasGrad), keys[g], st);
        }
      } else {
        dlinear_out.swap(dact_in);
      }
    }
    if (groups == 1) grads.swap(group_grads[0]);
  }

  // dlinear_out += the normalisation's input gradient from dact_in; each group's weight and bias gradients. A
  // BatchNorm over several groups (SyncBatchNorm) all-reduces the groups' sums of weight dy and of
  // weight dy xhat first, and every group applies the totals over all the rows.
  void norm_backward(size_t l, int groups) {
    const auto& p = layout.layers[l];
    const int gr = rows / groups;
    const size_t c = size_t(p.out);
    const T* w = cast_w.data() + p.ln_w;
    auto at = [&](std::vector<T>& v, int g) { return v.data() + size_t(g) * gr * c; };
    if (p.layernorm) {  // per row: mean and rstd are (rows)
      for (int g = 0; g < groups; ++g)
        layernorm_backward(at(dlinear_out, g), group_grads[g].data() + p.ln_w, group_grads[g].data() + p.ln_b, at(dact_in, g), at(linear_out[l], g), w,
                           mean[l].data() + size_t(g) * gr, rstd[l].data() + size_t(g) * gr, gr, p.out);
      return;
    }
    if (groups == 1) {
      batchnorm_backward(dlinear_out.data(), group_grads[0].data() + p.ln_w, group_grads[0].data() + p.ln_b, dact_in.data(), linear_out[l].data(), w,
                         mean[l].data(), rstd[l].data(), rows, p.out);
      return;
    }
    bn_group_sums.resize(size_t(groups));
    for (int g = 0; g < groups; ++g) {
      bn_group_sums[g].resize(2 * c);
      batchnorm_backward_sums(bn_group_sums[g].data(), bn_group_sums[g].data() + c, at(dact_in, g), at(linear_out[l], g), w, mean[l].data(),
                              rstd[l].data(), gr, p.out);
    }
    sync_batchnorm_allreduce(bn_total_sums, bn_group_sums, split.parallel());
    for (int g = 0; g < groups; ++g)
      batchnorm_backward_apply(at(dlinear_out, g), group_grads[g].data() + p.ln_w, group_grads[g].data() + p.ln_b, at(dact_in, g), at(linear_out[l], g),
                               w, mean[l].data(), rstd[l].data(), bn_total_sums.data(), bn_total_sums.data() + c, rows, gr,
                               p.out);
  }
};

template <class T>
Trainer<T>::Trainer(const MlpLayout& layout, const Recipe* recipe, const OptimizerConfig& opt, Task task,
                    uint64_t sr_seed, int64_t total_steps)
    : impl_(std::make_unique<Impl>(layout, recipe, opt, task, sr_seed, total_steps)) {
  if (recipe && !std::is_same_v<T, float>) throw std::logic_error("a recipe runs in FP32 opmath (Trainer<float>)");
  if (!recipe) return;
  set_split(recipe->parallel, recipe->accumulation);
  const GemmSpec* specs[kGemmPasses] = {&recipe->forward, &recipe->dgrad, &recipe->wgrad};
  for (int p = 0; p < kGemmPasses; ++p)
    impl_->gemms[p] = RecipeGemm(static_cast<GemmPass>(p), *specs[p], recipe->amax_history_len, recipe->margin);
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
void Trainer<T>::set_split(const ParallelSpec& p, const AccumulationSpec& a) {
  impl_->split.set(p, a);
}

template <class T>
RunState<T> Trainer<T>::init_state(const std::vector<double>& params) const {
  RunState<T> s = initial_state<T>(params, impl_->recipe);
  s.bn_mean.assign(impl_->layout.bn_channels, T(0));
  s.bn_var.assign(impl_->layout.bn_channels, T(1));
  return s;
}

template <class T>
StepStats Trainer<T>::step(RunState<T>& s, const BatchView& b, int64_t step, std::vector<T>* grads_out) {
  Impl& I = *impl_;
  I.cur = &s;
  StepStats st;
  st.loss_scale = s.scaler.scale();
  I.cast(s, uint64_t(step), &st);
  st.loss = I.split_gradient(b, uint64_t(step), st.loss_scale, st);
  finish_step(s, I.grads, I.recipe, I.opt, learning_rate(I.opt, step, I.total_steps), I.seed, uint64_t(step), st, grads_out);
  return st;
}

template <class T>
EvalResult Trainer<T>::evaluate(const RunState<T>& s, const BatchView& b) {
  Impl& I = *impl_;
  constexpr int kChunk = 1024;
  EvalResult e;
  RunState<T> probe = s.clone();  // evaluation must not advance delayed-scaling histories
  I.cur = &probe;
  I.cast(s, sr_keys::kEvalStep, nullptr);
  double loss = 0;
  int64_t correct = 0;
  const int f = I.layout.input, o = I.layout.output;
  for (int start = 0; start < b.rows; start += kChunk) {
    BatchView c;
    c.rows = std::min(kChunk, b.rows - start);
    c.x = b.x + size_t(start) * f;
    if (b.labels) c.labels = b.labels + start;
    if (b.targets) c.targets = b.targets + size_t(start) * o;
    const uint64_t key = sr_keys::eval_step(uint64_t(start));
    I.forward(c, std::span(&key, 1), false, nullptr);
    for (int i = 0; i < c.rows; ++i) loss += double(I.losses[i]);
    if (I.task == Task::kClassification)
      for (int i = 0; i < c.rows; ++i) {
        const T* row = I.layer_in.back().data() + size_t(i) * o;
        const int arg = int(std::max_element(row, row + o) - row);
        correct += arg == c.labels[i];
      }
  }
  e.loss = loss / b.rows;
  e.accuracy = double(correct) / b.rows;
  return e;
}

template <class T>
const std::vector<T>& Trainer<T>::last_activation_grads() const {
  return impl_->act_grads;
}

template <class T>
void Trainer<T>::set_gemm_executor(std::shared_ptr<GemmExecutor> b) {
  if (b && impl_->exact()) throw std::logic_error("the FP64 reference has no GEMM backend");
  impl_->backend = std::move(b);
}

template struct RunState<float>;
template struct RunState<double>;
template class Trainer<float>;
template class Trainer<double>;

}  // namespace precsim

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
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/train/split_step.h"
#include "precsim/sim/train/weight_update.h"

namespace precsim {
namespace {

// Stochastic-rounding step offset of evaluation passes, so they never share bits with training.
constexpr uint64_t kEvalStep = uint64_t{1} << 40;
enum GemmKind : int { kFwd = 0, kDgrad = 1, kWgrad = 2 };

template <class T>
std::span<T> sp(std::vector<T>& v, size_t off, size_t n) {
  return std::span<T>(v.data() + off, n);
}

template <class T>
uint64_t count_nonzero(std::span<const T> v) {
  uint64_t n = 0;
  for (T e : v) n += e != T(0) && std::isfinite(e);
  return n;
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
  MlpLayout L;
  const Recipe* r;
  OptimizerConfig opt;
  Task task;
  uint64_t seed;
  int64_t total_steps;
  std::array<AccumModel, 3> accum;
  std::array<OperandQuantizer, 6> operand;  // (gemm kind) * 2 + (0: a, 1: b)
  std::shared_ptr<GemmExecutor> backend;     // null: the emulated gemm()

  // Workspace, sized for the current batch.
  int rows = 0;
  std::vector<T> x, wc, grads;
  std::vector<std::vector<T>> in, z, ln_out, mean, rstd, bvar, act;  // per layer
  bool update_running = true;  // this forward updates BatchNorm running statistics (worker 0's)
  std::vector<T> losses, probs, targets, dz, dprev, du, dres, tmp, qa, qb, act_grads;
  std::vector<int32_t> labels;
  RunState<T>* cur = nullptr;  // the state being stepped (delayed-scaling histories)
  // The split of a step: per-worker accumulation buffers (and Kahan compensations), per-row loss
  // gradients, and the parameter tensors in parameter order (the DDP bucket units).
  ParallelSpec par;
  AccumulationSpec acc;
  std::vector<ParamRange> tensors;
  std::vector<std::vector<T>> wacc, wcomp;
  std::vector<T> row_dloss;
  // Row groups of one forward: one, or under SyncBatchNorm one per worker (worker w's micro-batch
  // m), each with its own GEMM calls, stochastic-rounding key and gradient (ggrads).
  std::vector<std::vector<T>> ggrads, bn_sums;
  std::vector<T> bn_group, bn_total;
  std::vector<double> gx, gtargets;
  std::vector<int32_t> glabels;

  bool exact() const { return r == nullptr; }

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
    const size_t n = L.layers.size();
    in.assign(n + 1, {});
    z.assign(n, {});
    ln_out.assign(n, {});
    mean.assign(n, {});
    rstd.assign(n, {});
    bvar.assign(n, {});
    act.assign(n, {});
    for (size_t l = 0; l < n; ++l) {
      const auto& s = L.layers[l];
      in[l].resize(size_t(b) * s.in);
      z[l].resize(size_t(b) * s.out);
      if (s.layernorm || s.batchnorm) {
        ln_out[l].resize(size_t(b) * s.out);
        mean[l].resize(s.batchnorm ? s.out : b);  // BatchNorm: per channel; LayerNorm: per row
        rstd[l].resize(s.batchnorm ? s.out : b);
        bvar[l].resize(s.batchnorm ? s.out : 0);
      }
      if (s.hidden) act[l].resize(size_t(b) * s.out);
    }
    in[n].resize(size_t(b) * L.output);
    losses.resize(b);
    probs.resize(size_t(b) * L.output);
  }

  // C = op(A) op(B) through the GEMM emulation, each operand quantized along the reduction
  // dimension from its high-precision source. a is (m,k) or, with trans_a, stored (k,m); b is
  // (k,n) or, with trans_b, stored (n,k).
  void gemm_op(GemmKind g, int layer, T* c, const T* a, bool trans_a, const T* b, bool trans_b, int m, int n, int k,
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
      const GemmSpec& spec = g == kFwd ? r->forward : g == kDgrad ? r->dgrad : r->wgrad;
      const Role role = g == kFwd ? Role::kGemmInForward : g == kDgrad ? Role::kGemmInDgrad : Role::kGemmInWgrad;
      // Storage shapes and the axis of K in each.
      const size_t ar = trans_a ? k : m, ac = trans_a ? m : k, br = trans_b ? n : k, bc = trans_b ? k : n;
      qa.resize(ar * ac);
      qb.resize(br * bc);
      QuantStats sa, sb;
      const uint32_t tid = uint32_t(layer) * 8 + uint32_t(g) * 2;
      const size_t slot = size_t(layer) * 6 + size_t(g) * 2;
      if (cur->delayed.size() < slot + 2) cur->delayed.resize(slot + 2);
      args.a_format = operand[g * 2].apply(spec.a, std::span<const float>(a, qa.size()), qa, ar, ac, trans_a ? 0 : 1,
                                           SrKey{seed, step, tid, uint32_t(role)}, &sa, &cur->delayed[slot]);
      args.b_format = operand[g * 2 + 1].apply(spec.b, std::span<const float>(b, qb.size()), qb, br, bc, trans_b ? 1 : 0,
                                               SrKey{seed, step, tid + 1, uint32_t(role)}, &sb, &cur->delayed[slot + 1]);
      if (st) {
        st->role_nonzero[size_t(role)] += count_nonzero(std::span<const T>(a, qa.size())) +
                                          count_nonzero(std::span<const T>(b, qb.size()));
        st->roles[size_t(role)] += sa;
        st->roles[size_t(role)] += sb;
      }
      args.input_policy = InputPolicy::kTrust;
      if (backend) backend->gemm(static_cast<GemmPass>(g), accum[g], args, qa.data(), qb.data(), c);
      else gemm(accum[g], args, qa.data(), qb.data(), c);
    }
  }

  // BatchNorm: batch statistics in training mode, updating the running ones (PyTorch: momentum 0.1,
  // unbiased variance); the running ones in evaluation. With several row groups (SyncBatchNorm)
  // each group's mean and variance are combined into those of all the rows, in group order.
  void batchnorm(size_t l, bool train, int groups) {
    const auto& s = L.layers[l];
    T* rm = cur->bn_mean.data() + s.bn_stats;
    T* rv = cur->bn_var.data() + s.bn_stats;
    if (!train) {
      batchnorm_inference(ln_out[l].data(), z[l].data(), wc.data() + s.ln_w, wc.data() + s.ln_b, rm, rv, rows, s.out);
      return;
    }
    if (groups == 1) {
      batchnorm_forward(ln_out[l].data(), mean[l].data(), bvar[l].data(), rstd[l].data(), z[l].data(),
                        wc.data() + s.ln_w, wc.data() + s.ln_b, rows, s.out);
    } else {
      const int gr = rows / groups;
      const size_t c = size_t(s.out);
      bn_group.resize(2 * size_t(groups) * c);  // (G,C) means, then (G,C) variances
      T* gm = bn_group.data();
      T* gv = gm + size_t(groups) * c;
      for (int g = 0; g < groups; ++g)
        batchnorm_stats(gm + g * c, gv + g * c, z[l].data() + size_t(g) * gr * c, gr, s.out);
      const std::vector<int> counts(size_t(groups), gr);
      batchnorm_combine_stats(mean[l].data(), bvar[l].data(), gm, gv, counts.data(), groups, s.out);
      batchnorm_normalize(ln_out[l].data(), rstd[l].data(), z[l].data(), wc.data() + s.ln_w, wc.data() + s.ln_b,
                          mean[l].data(), bvar[l].data(), rows, s.out);
    }
    if (!update_running) return;
    const T mom = T(0.1), unbias = rows > 1 ? T(rows) / T(rows - 1) : T(1);
    for (int i = 0; i < s.out; ++i) {
      rm[i] = (T(1) - mom) * rm[i] + mom * mean[l][i];
      rv[i] = (T(1) - mom) * rv[i] + mom * bvar[l][i] * unbias;
    }
  }

  // keys[g]: the stochastic-rounding step key of row group g (the rows split evenly).
  void forward(const BatchView& bv, std::span<const uint64_t> keys, bool train, StepStats* st) {
    resize(bv.rows);
    const size_t n = L.layers.size(), groups = keys.size();
    const int gr = rows / int(groups);
    const TensorFormat af = r ? r->activations : TensorFormat{};
    for (size_t i = 0; i < in[0].size(); ++i) in[0][i] = static_cast<T>(bv.x[i]);
    for (size_t l = 0; l < n; ++l) {
      const auto& s = L.layers[l];
      const uint32_t tid = uint32_t(l) * 8;
      const size_t cnt = size_t(rows) * s.out;
      for (size_t g = 0; g < groups; ++g)
        gemm_op(kFwd, int(l), z[l].data() + g * gr * s.out, in[l].data() + g * gr * s.in, false, wc.data() + s.w, true,
                gr, s.out, s.in, keys[g], st);
      bias_forward(z[l].data(), wc.data() + s.b, rows, s.out);
      round_rows(z[l], s.out, af, Role::kActivations, tid, keys, st);
      if (!s.hidden) {
        std::copy(z[l].begin(), z[l].end(), in[l + 1].begin());
        continue;
      }
      const T* u = z[l].data();
      if (s.layernorm || s.batchnorm) {
        if (s.layernorm)
          layernorm_forward(ln_out[l].data(), mean[l].data(), rstd[l].data(), z[l].data(), wc.data() + s.ln_w,
                            wc.data() + s.ln_b, rows, s.out);
        else
          batchnorm(l, train, int(groups));
        if (r && !r->autocast) round_rows(ln_out[l], s.out, r->activations, Role::kActivations, tid + 1, keys, st);
        u = ln_out[l].data();
      }
      if (L.activation == Activation::kRelu) relu_forward(act[l].data(), u, cnt);
      else gelu_forward(act[l].data(), u, cnt);
      round_rows(act[l], s.out, af, Role::kActivations, tid + 2, keys, st);
      if (s.residual) {
        residual_forward(in[l + 1].data(), in[l].data(), act[l].data(), cnt);
        round_rows(in[l + 1], s.out, af, Role::kActivations, tid + 3, keys, st);
      } else {
        std::copy(act[l].begin(), act[l].end(), in[l + 1].begin());
      }
    }
    const T* logits = in[n].data();
    if (task == Task::kClassification) {
      labels.assign(bv.labels, bv.labels + rows);
      softmax_xent_forward(losses.data(), probs.data(), logits, labels.data(), rows, L.output);
    } else {
      targets.resize(size_t(rows) * L.output);
      for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<T>(bv.targets[i]);
      mse_forward(losses.data(), logits, targets.data(), rows, L.output);
    }
  }

  // The rows of the given parts (mb rows each) as one batch: a view into b for one part, else a copy.
  BatchView gather_parts(const BatchView& b, std::span<const int> parts, int mb) {
    BatchView v;
    v.rows = mb * int(parts.size());
    if (parts.size() == 1) {
      const size_t first = size_t(parts[0]) * mb;
      v.x = b.x + first * L.input;
      if (b.labels) v.labels = b.labels + first;
      if (b.targets) v.targets = b.targets + first * L.output;
      return v;
    }
    gx.clear();
    glabels.clear();
    gtargets.clear();
    for (const int p : parts) {
      const size_t first = size_t(p) * mb, last = first + mb;
      gx.insert(gx.end(), b.x + first * L.input, b.x + last * L.input);
      if (b.labels) glabels.insert(glabels.end(), b.labels + first, b.labels + last);
      if (b.targets) gtargets.insert(gtargets.end(), b.targets + first * L.output, b.targets + last * L.output);
    }
    v.x = gx.data();
    if (b.labels) v.labels = glabels.data();
    if (b.targets) v.targets = gtargets.data();
    return v;
  }

  // Forward and backward of every micro-batch of every worker, accumulation, all-reduce: grads
  // holds the all-reduced (still loss-scaled) gradient. Returns the loss of the global batch.
  double split_gradient(const BatchView& b, uint64_t step, float scale, StepStats& st) {
    const int w_count = par.workers, n_count = acc.micro_batches, parts = w_count * n_count;
    if (b.rows % parts != 0)
      throw std::invalid_argument(fmt::format("batch {} is not divisible by workers {} x micro-batches {}", b.rows,
                                              w_count, n_count));
    const int mb = b.rows / parts;
    auto items = [&](int row) { return b.items ? b.items[row] : 1.0; };
    double n_total = 0, loss_sum = 0;
    for (int i = 0; i < b.rows; ++i) n_total += items(i);
    const double divisor = average_divisor(par);
    wacc.assign(size_t(w_count), std::vector<T>(L.param_count, T(0)));
    wcomp.assign(acc.rounding == BufferRounding::kKahan ? size_t(w_count) : 0, std::vector<T>(L.param_count, T(0)));
    std::vector<T> no_comp;
    // One forward per micro-batch of each worker (part w N + m, in order); under SyncBatchNorm one
    // per micro-batch index m for all workers at once, worker w's micro-batch as row group w.
    const bool sync = par.batchnorm == BatchNormStats::kSync && w_count > 1 && L.bn_channels > 0;
    const int groups = sync ? w_count : 1;
    std::vector<int> part(static_cast<size_t>(groups));
    std::vector<uint64_t> keys(static_cast<size_t>(groups));
    row_dloss.resize(size_t(groups) * mb);
    for (int f = 0; f < parts / groups; ++f) {
      for (int g = 0; g < groups; ++g) {
        part[g] = sync ? g * n_count + f : f;
        keys[g] = part_step_key(step, part[g]);
      }
      // DDP broadcasts rank 0's buffers; SyncBatchNorm's statistics are every rank's.
      update_running = sync || part[0] < n_count;
      forward(gather_parts(b, part, mb), keys, true, &st);
      for (int g = 0; g < groups; ++g) {
        const int first = part[g] * mb;
        double n_mb = 0;
        for (int i = 0; i < mb; ++i) {
          loss_sum += items(first + i) * static_cast<double>(losses[size_t(g) * mb + i]);
          n_mb += items(first + i);
        }
        // The loss each row's gradient comes from, with the averaging's division D undone in
        // advance: items_i x D / loss_denominator.
        const double den = loss_denominator(acc, n_total, parts, n_mb);
        for (int i = 0; i < mb; ++i)
          row_dloss[size_t(g) * mb + i] =
              den > 0 ? static_cast<T>(double(scale) * items(first + i) * divisor) / static_cast<T>(den) : T(0);
      }
      backward(row_dloss.data(), keys, &st);
      if (parts == 1 && allreduce_is_identity<T>(par, exact())) {  // grads is final
        update_running = true;
        return n_total > 0 ? loss_sum / n_total : 0.0;
      }
      for (int g = 0; g < groups; ++g) {
        if (groups > 1) grads.swap(ggrads[g]);
        const int w = part[g] / n_count;
        accumulate_gradient(wacc[w], wcomp.empty() ? no_comp : wcomp[w], grads, acc, exact(), seed, step,
                            uint32_t(part[g]), &st);
      }
    }
    update_running = true;
    const size_t ar = size_t(Role::kAllReduce);
    st.ranks_identical = bucketed_allreduce(grads, wacc, tensors, par, &st.roles[ar], &st.role_nonzero[ar]);
    return n_total > 0 ? loss_sum / n_total : 0.0;
  }

  void cast_weights(const RunState<T>& s, uint64_t step, StepStats* st) {
    wc = s.weights;
    if (!r) return;
    round(std::span<T>(wc), r->weights, Role::kWeights, 1u << 20, step, st);
    if (r->autocast)  // layer_norm (and here batch_norm) runs in FP32 with the FP32 parameters
      for (const auto& l : L.layers)
        if (l.layernorm || l.batchnorm)
          for (int i = 0; i < l.out; ++i) {
            wc[l.ln_w + i] = s.weights[l.ln_w + i];
            wc[l.ln_b + i] = s.weights[l.ln_b + i];
          }
  }

  // row_dloss[b]: d(scaled loss) / d(loss of row b). Row group g's parameter gradient goes to
  // ggrads[g]; with one group it ends in grads.
  void backward(const T* row_dloss, std::span<const uint64_t> keys, StepStats* st) {
    const size_t n = L.layers.size(), groups = keys.size();
    const int gr = rows / int(groups);
    const TensorFormat ag = r ? r->activation_grads : TensorFormat{};
    const TensorFormat wg = r ? r->weight_grads : TensorFormat{};
    ggrads.resize(groups);
    for (auto& g : ggrads) g.assign(L.param_count, T(0));
    act_grads.clear();
    const size_t o = size_t(L.output);
    dz.assign(size_t(rows) * o, T(0));
    for (int b = 0; b < rows; ++b) {  // rows are independent: one call per row with its own weight
      if (task == Task::kClassification)
        softmax_xent_backward(dz.data() + b * o, probs.data() + b * o, labels.data() + b, row_dloss[b], 1, L.output);
      else
        mse_backward(dz.data() + b * o, in[n].data() + b * o, targets.data() + b * o, row_dloss[b], 1, L.output);
    }
    round_rows(dz, o, ag, Role::kActivationGrads, 1u << 21, keys, st);
    bool have_res = false;
    for (size_t li = n; li-- > 0;) {
      const auto& s = L.layers[li];
      const uint32_t tid = uint32_t(li) * 8 + (1u << 22);
      act_grads.insert(act_grads.end(), dz.begin(), dz.end());
      for (size_t g = 0; g < groups; ++g) {
        // dW = dz^T in: A = dz stored (rows,out) transposed, B = in (rows,in); K = rows.
        gemm_op(kWgrad, int(li), ggrads[g].data() + s.w, dz.data() + g * gr * s.out, true,
                in[li].data() + g * gr * s.in, false, s.out, s.in, gr, keys[g], st);
        round(sp(ggrads[g], s.w, size_t(s.in) * s.out), wg, Role::kWeightGrads, tid, keys[g], st);
        bias_backward(ggrads[g].data() + s.b, dz.data() + g * gr * s.out, gr, s.out);
        round(sp(ggrads[g], s.b, s.out), wg, Role::kWeightGrads, tid + 1, keys[g], st);
      }
      if (li == 0) break;
      // dX = dz W: A = dz (rows,out), B = W stored (out,in); K = out.
      const auto& p = L.layers[li - 1];
      dprev.assign(size_t(rows) * s.in, T(0));
      for (size_t g = 0; g < groups; ++g)
        gemm_op(kDgrad, int(li), dprev.data() + g * gr * s.in, dz.data() + g * gr * s.out, false, wc.data() + s.w,
                false, gr, s.in, s.out, keys[g], st);
      if (have_res)
        for (size_t i = 0; i < dprev.size(); ++i) dprev[i] += dres[i];
      round_rows(dprev, s.in, ag, Role::kActivationGrads, tid + 2, keys, st);
      // Layer li-1's output h = [in +] act(u): dres carries dh to its input.
      have_res = p.residual;
      if (have_res) dres = dprev;
      const size_t cnt = size_t(rows) * p.out;
      const T* u = p.layernorm || p.batchnorm ? ln_out[li - 1].data() : z[li - 1].data();
      du.assign(cnt, T(0));
      if (L.activation == Activation::kRelu) relu_backward(du.data(), u, dprev.data(), cnt);
      else gelu_backward(du.data(), u, dprev.data(), cnt);
      round_rows(du, p.out, ag, Role::kActivationGrads, tid + 3, keys, st);
      if (p.layernorm || p.batchnorm) {
        dz.assign(cnt, T(0));
        norm_backward(li - 1, int(groups));
        round_rows(dz, p.out, ag, Role::kActivationGrads, tid + 4, keys, st);
        for (size_t g = 0; g < groups; ++g) {
          round(sp(ggrads[g], p.ln_w, p.out), wg, Role::kWeightGrads, tid + 5, keys[g], st);
          round(sp(ggrads[g], p.ln_b, p.out), wg, Role::kWeightGrads, tid + 6, keys[g], st);
        }
      } else {
        dz.swap(du);
      }
    }
    if (groups == 1) grads.swap(ggrads[0]);
  }

  // dz += the normalisation's input gradient from du; each group's weight and bias gradients. A
  // BatchNorm over several groups (SyncBatchNorm) all-reduces the groups' sums of weight dy and of
  // weight dy xhat first, and every group applies the totals over all the rows.
  void norm_backward(size_t l, int groups) {
    const auto& p = L.layers[l];
    const int gr = rows / groups;
    const size_t c = size_t(p.out);
    const T* w = wc.data() + p.ln_w;
    auto at = [&](std::vector<T>& v, int g) { return v.data() + size_t(g) * gr * c; };
    if (p.layernorm) {  // per row: mean and rstd are (rows)
      for (int g = 0; g < groups; ++g)
        layernorm_backward(at(dz, g), ggrads[g].data() + p.ln_w, ggrads[g].data() + p.ln_b, at(du, g), at(z[l], g), w,
                           mean[l].data() + size_t(g) * gr, rstd[l].data() + size_t(g) * gr, gr, p.out);
      return;
    }
    if (groups == 1) {
      batchnorm_backward(dz.data(), ggrads[0].data() + p.ln_w, ggrads[0].data() + p.ln_b, du.data(), z[l].data(), w,
                         mean[l].data(), rstd[l].data(), rows, p.out);
      return;
    }
    bn_sums.resize(size_t(groups));
    for (int g = 0; g < groups; ++g) {
      bn_sums[g].resize(2 * c);
      batchnorm_backward_sums(bn_sums[g].data(), bn_sums[g].data() + c, at(du, g), at(z[l], g), w, mean[l].data(),
                              rstd[l].data(), gr, p.out);
    }
    sync_batchnorm_allreduce(bn_total, bn_sums, par);
    for (int g = 0; g < groups; ++g)
      batchnorm_backward_apply(at(dz, g), ggrads[g].data() + p.ln_w, ggrads[g].data() + p.ln_b, at(du, g), at(z[l], g),
                               w, mean[l].data(), rstd[l].data(), bn_total.data(), bn_total.data() + c, rows, gr,
                               p.out);
  }
};

template <class T>
Trainer<T>::Trainer(const MlpLayout& layout, const Recipe* recipe, const OptimizerConfig& opt, Task task,
                    uint64_t sr_seed, int64_t total_steps)
    : impl_(std::make_unique<Impl>()) {
  if (recipe && !std::is_same_v<T, float>) throw std::logic_error("a recipe runs in FP32 opmath (Trainer<float>)");
  impl_->L = layout;
  impl_->r = recipe;
  impl_->opt = opt;
  impl_->task = task;
  impl_->seed = sr_seed;
  impl_->total_steps = total_steps;
  for (const auto& l : layout.layers) {
    impl_->tensors.push_back({l.w, size_t(l.in) * l.out});
    impl_->tensors.push_back({l.b, size_t(l.out)});
    if (l.layernorm || l.batchnorm) {
      impl_->tensors.push_back({l.ln_w, size_t(l.out)});
      impl_->tensors.push_back({l.ln_b, size_t(l.out)});
    }
  }
  if (recipe) set_split(recipe->parallel, recipe->accumulation);
  if (recipe) {
    impl_->accum[kFwd] = parse_accum_model(recipe->forward.accum);
    impl_->accum[kDgrad] = parse_accum_model(recipe->dgrad.accum);
    impl_->accum[kWgrad] = parse_accum_model(recipe->wgrad.accum);
    for (auto& o : impl_->operand) o.configure(recipe->amax_history_len, recipe->margin);
  }
}

template <class T>
Trainer<T>::~Trainer() = default;

template <class T>
void Trainer<T>::set_split(const ParallelSpec& p, const AccumulationSpec& a) {
  check_split_counts(p, a);
  impl_->par = p;
  impl_->acc = a;
}

template <class T>
RunState<T> Trainer<T>::init_state(const std::vector<double>& params) const {
  RunState<T> s = initial_state<T>(params, impl_->r);
  s.bn_mean.assign(impl_->L.bn_channels, T(0));
  s.bn_var.assign(impl_->L.bn_channels, T(1));
  return s;
}

template <class T>
StepStats Trainer<T>::step(RunState<T>& s, const BatchView& b, int64_t step, std::vector<T>* grads_out) {
  Impl& I = *impl_;
  I.cur = &s;
  StepStats st;
  st.loss_scale = s.scaler.scale();
  I.cast_weights(s, uint64_t(step), &st);
  st.loss = I.split_gradient(b, uint64_t(step), st.loss_scale, st);
  finish_step(s, I.grads, I.r, I.opt, learning_rate(I.opt, step, I.total_steps), I.seed, uint64_t(step), st, grads_out);
  return st;
}

template <class T>
EvalResult Trainer<T>::evaluate(const RunState<T>& s, const BatchView& b) {
  Impl& I = *impl_;
  constexpr int kChunk = 1024;
  EvalResult e;
  RunState<T> probe = s.clone();  // evaluation must not advance delayed-scaling histories
  I.cur = &probe;
  I.cast_weights(s, kEvalStep, nullptr);
  double loss = 0;
  int64_t correct = 0;
  const int f = I.L.input, o = I.L.output;
  for (int start = 0; start < b.rows; start += kChunk) {
    BatchView c;
    c.rows = std::min(kChunk, b.rows - start);
    c.x = b.x + size_t(start) * f;
    if (b.labels) c.labels = b.labels + start;
    if (b.targets) c.targets = b.targets + size_t(start) * o;
    const uint64_t key = kEvalStep + uint64_t(start);
    I.forward(c, std::span(&key, 1), false, nullptr);
    for (int i = 0; i < c.rows; ++i) loss += double(I.losses[i]);
    if (I.task == Task::kClassification)
      for (int i = 0; i < c.rows; ++i) {
        const T* row = I.in.back().data() + size_t(i) * o;
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

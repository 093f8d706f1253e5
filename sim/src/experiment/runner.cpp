#include "precsim/sim/experiment/runner.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <nlohmann/json.hpp>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/train/mlp_trainer.h"
#include "transformer_problem.h"

namespace precsim {
namespace {

using nlohmann::json;
constexpr size_t kRoles = static_cast<size_t>(Role::kCount);

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// One FP32 ulp of each weight, in a keyed random direction (the chaos control's start).
std::vector<double> perturb_one_ulp(const std::vector<double>& w, uint64_t seed) {
  std::vector<double> p(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const float f = static_cast<float>(w[i]);
    const bool up = uniform01(seed, 9001, i) < 0.5;
    p[i] = std::nextafter(f, up ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
  }
  return p;
}

struct BatchBuffers {
  std::vector<double> x, t, items;
  std::vector<int32_t> y;
};

BatchView batch_view(const Dataset& d, const std::vector<double>& row_items, const std::vector<int>& idx,
                     BatchBuffers& buf) {
  std::vector<double>& x = buf.x;
  std::vector<double>& t = buf.t;
  std::vector<int32_t>& y = buf.y;
  const int f = d.features, o = d.outputs;
  x.resize(idx.size() * f);
  for (size_t i = 0; i < idx.size(); ++i)
    std::copy_n(d.x_train.begin() + size_t(idx[i]) * f, f, x.begin() + i * f);
  BatchView b{x.data(), nullptr, nullptr, int(idx.size())};
  buf.items.resize(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) buf.items[i] = row_items[idx[i]];
  b.items = buf.items.data();
  if (d.task == Task::kClassification) {
    y.resize(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) y[i] = d.y_train[idx[i]];
    b.labels = y.data();
  } else {
    t.resize(idx.size() * o);
    for (size_t i = 0; i < idx.size(); ++i) std::copy_n(d.t_train.begin() + size_t(idx[i]) * o, o, t.begin() + i * o);
    b.targets = t.data();
  }
  return b;
}

BatchView heldout_view(const Dataset& d) {
  return BatchView{d.x_heldout.data(), d.y_heldout.empty() ? nullptr : d.y_heldout.data(),
                   d.t_heldout.empty() ? nullptr : d.t_heldout.data(), d.heldout_count()};
}

// A variant's twin with its matrix products on another backend (RunHooks::gemm_executor): the same
// recipe, initial weights and batches, compared with the emulated variant after every step.
template <class Var>
struct BackendTwin {
  std::unique_ptr<Var> trainer;
  std::shared_ptr<GemmExecutor> backend;
  RunState<float> state;
  json series = json::object();
  double max_abs_loss_diff = 0, max_weight_rel_err = 0, weight_rel_err = 0, last_loss = 0;
  uint64_t skipped = 0;
  int64_t diverged_at = -1;
};

template <class Var>
struct VariantRun {
  const Recipe* recipe;
  std::unique_ptr<Var> trainer;
  RunState<float> state;
  RoleStats roles{};
  std::array<uint64_t, kRoles> nonzero{};
  uint64_t intended = 0, lost = 0, skipped = 0;
  int64_t diverged_at = -1;
  double last_loss = 0;
  std::vector<double> loss_window;
  json series = json::object(), local = json::object(), evals = json::object(), histograms = json::array();
  std::vector<double> local_grad_err, local_grad_cos, local_update_err, local_underflow;
  // A split variant's own arithmetic without the split (1 worker, 1 micro-batch), at shadow steps.
  std::unique_ptr<Var> unsplit;
  std::vector<double> split_grad_err, split_grad_cos;
  json logged;  // this step's record for hooks.on_logged_step, emitted after the parallel loop
  json layers = json::object();  // per-layer series of models that have layers to report (transformer)
  std::unique_ptr<BackendTwin<Var>> twin;
};

void push(json& series, const std::string& key, double v) { series[key].push_back(json_number(v)); }

// One step of the twin on the batch the emulated variant just took (its loss `loss`, its weights
// after the step `w`). A non-finite difference counts as infinite.
template <class Var>
void step_twin(BackendTwin<Var>& t, const BatchView& b, int64_t step, double loss, const std::vector<float>& w, bool log) {
  const StepStats st = t.trainer->step(t.state, b, step);
  const double diff = st.loss - loss;
  t.weight_rel_err = rel_error(to_double(t.state.weights), to_double(w));
  t.last_loss = st.loss;
  t.skipped += st.skipped;
  const double inf = std::numeric_limits<double>::infinity();
  t.max_abs_loss_diff = std::max(t.max_abs_loss_diff, std::isfinite(diff) ? std::abs(diff) : inf);
  t.max_weight_rel_err = std::max(t.max_weight_rel_err, std::isfinite(t.weight_rel_err) ? t.weight_rel_err : inf);
  if (!std::isfinite(st.loss)) t.diverged_at = step;
  if (!log) return;
  push(t.series, "step", double(step));
  push(t.series, "loss", st.loss);
  push(t.series, "loss_diff", diff);
  push(t.series, "weight_rel_err", t.weight_rel_err);
  push(t.series, "loss_scale", st.loss_scale);
}

template <class Var>
json twin_json(const BackendTwin<Var>& t, const std::string& name) {
  return {{"name", name},
          {"summary", {{"last_loss", json_number(t.last_loss)},
                       {"max_abs_loss_diff", json_number(t.max_abs_loss_diff)},
                       {"max_weight_rel_err", json_number(t.max_weight_rel_err)},
                       {"final_weight_rel_err", json_number(t.weight_rel_err)},
                       {"skipped_steps", t.skipped},
                       {"diverged_at", t.diverged_at >= 0 ? json(t.diverged_at) : json(nullptr)}}},
          {"series", t.series},
          {"calls", t.backend->report()}};
}

double window_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

json roles_json(const RoleStats& r, const std::array<uint64_t, kRoles>& nz) {
  json j = json::object();
  for (size_t i = 0; i < kRoles; ++i) {
    const QuantStats& q = r[i];
    if (q.count == 0) continue;
    j[std::string(to_string(static_cast<Role>(i)))] = {
        {"count", q.count},
        {"nonzero_inputs", nz[i]},
        {"flushed_to_zero", q.underflow_to_zero},
        {"flush_fraction", json_number(nz[i] ? double(q.underflow_to_zero) / double(nz[i]) : 0.0)},
        {"subnormal", q.subnormal},
        {"subnormal_fraction", json_number(double(q.subnormal) / double(q.count))},
        {"inexact", q.inexact},
        {"overflow", q.overflow},
        {"saturated", q.saturated},
        {"nan", q.nan}};
  }
  return j;
}

// The MLP on tabular data: what run_seed needs of a model and its data.
struct MlpProblem {
  using Ref = Trainer<double>;
  using Var = Trainer<float>;
  const TrainConfig& c;
  uint64_t seed;
  Dataset data;
  MlpLayout layout;
  std::vector<double> init;
  BatchView held;
  std::vector<double> row_items;
  std::vector<int> idx;
  BatchBuffers bb;

  MlpProblem(const TrainConfig& cfg, uint64_t s)
      : c(cfg), seed(s), data(make_dataset(cfg.data, s)), layout(make_mlp_layout(cfg.model, data.features, data.outputs)),
        init(init_mlp(layout, cfg.model, s)), held(heldout_view(data)),
        row_items(row_item_counts(cfg.items, data.train_count(), s)) {}
  std::unique_ptr<Ref> reference(int64_t n) const {
    return std::make_unique<Ref>(layout, nullptr, c.optimizer, data.task, seed, n);
  }
  std::unique_ptr<Var> variant(const Recipe& r, int64_t n) const {
    return std::make_unique<Var>(layout, &r, c.optimizer, data.task, seed, n);
  }
  BatchView batch(int64_t step) {
    batch_indices(idx, data.train_count(), c.batch, seed, uint64_t(step));
    return batch_view(data, row_items, idx, bb);
  }
  template <class Tr, class S>
  EvalResult evaluate(Tr& t, const S& s) const {
    return t.evaluate(s, held);
  }
  void observe(const Var&, json&, int64_t, bool) const {}  // an MLP has no per-layer statistics
};

// One seed of the whole experiment.
template <class P>
json run_seed(const TrainConfig& c, P& p, uint64_t seed, int seed_index, const RunHooks& hooks) {
  const std::vector<double>& init = p.init;
  const int64_t n_steps = c.steps;
  const int log_every = c.log_every > 0 ? c.log_every : int(std::max<int64_t>(1, (n_steps + 199) / 200));
  const int eval_every = c.eval_every > 0 ? c.eval_every : int(std::max<int64_t>(1, n_steps / 10));
  std::set<int64_t> hist_steps(c.histogram_steps.begin(), c.histogram_steps.end());
  if (c.histogram_steps.empty()) hist_steps = {0, n_steps - 1};
  const int window = int(std::max<int64_t>(1, n_steps / 10));

  const auto ref_owner = p.reference(n_steps), chaos_owner = p.reference(n_steps);
  auto& ref_tr = *ref_owner;
  auto& chaos_tr = *chaos_owner;
  RunState<double> ref = ref_tr.init_state(init);
  RunState<double> chaos = chaos_tr.init_state(perturb_one_ulp(init, seed));
  std::vector<VariantRun<typename P::Var>> runs;
  for (const Recipe& r : c.variants) {
    VariantRun<typename P::Var> v;
    v.recipe = &r;
    v.trainer = p.variant(r, n_steps);
    v.state = v.trainer->init_state(init);
    if constexpr (requires { v.unsplit->set_split(ParallelSpec{}, AccumulationSpec{}); })
      if (r.parallel.workers * r.accumulation.micro_batches > 1) {
        v.unsplit = p.variant(r, n_steps);
        v.unsplit->set_split(ParallelSpec{}, AccumulationSpec{});
      }
    if constexpr (std::is_same_v<typename P::Var, Trainer<float>>)
      if (hooks.gemm_executor) {
        v.twin = std::make_unique<BackendTwin<typename P::Var>>();
        v.twin->trainer = p.variant(r, n_steps);
        v.twin->backend = hooks.gemm_executor(r);
        v.twin->trainer->set_gemm_executor(v.twin->backend);
        v.twin->state = v.twin->trainer->init_state(init);
      }
    runs.push_back(std::move(v));
  }
  json ref_series = json::object(), ref_evals = json::object();
  std::vector<double> ref_window;
  double ref_initial_loss = 0, ref_last = 0;
  std::vector<double> ref_grad, ref_before;
  int64_t steps_completed = 0;

  for (int64_t step = 0; step < n_steps; ++step) {
    const bool stopping = hooks.stop && hooks.stop();
    const auto& b = p.batch(step);
    const bool log = step % log_every == 0 || step == n_steps - 1 || stopping;
    const bool shadow = c.shadow_every > 0 && step % c.shadow_every == 0;
    const bool eval = (step + 1) % eval_every == 0 || step == n_steps - 1 || stopping;
    const bool hist = hist_steps.count(step) > 0;

    ref_before = ref.weights;
    // The reference and the chaos control, and below the variants, are independent runs: each
    // takes one thread (the GEMMs inside run single-threaded: OpenMP regions do not nest), so a
    // step forks twice rather than once per matrix product, which starved small models of both
    // cores (idle spinning at every fork). Nothing is shared, so results do not depend on it.
    StepStats rs, cs;
#pragma omp parallel sections
    {
#pragma omp section
      rs = ref_tr.step(ref, b, step, &ref_grad);
#pragma omp section
      cs = chaos_tr.step(chaos, b, step, nullptr);
    }
    std::vector<double> ref_delta(ref.weights.size());
    for (size_t i = 0; i < ref_delta.size(); ++i) ref_delta[i] = ref.weights[i] - ref_before[i];
    if (step == 0) ref_initial_loss = rs.loss;
    ref_last = rs.loss;
    ref_window.push_back(rs.loss);
    if (int(ref_window.size()) > window) ref_window.erase(ref_window.begin());
    const double ref_norm = norm2(ref.weights);
    const double chaos_dist = rel_error(chaos.weights, ref.weights);
    if (log) {
      push(ref_series, "step", double(step));
      push(ref_series, "loss", rs.loss);
      push(ref_series, "chaos_loss", cs.loss);
      push(ref_series, "chaos_weight_distance", chaos_dist);
      push(ref_series, "grad_norm", rs.grad_norm);
    }
    if (eval) {
      const EvalResult e = p.evaluate(ref_tr, ref);
      push(ref_evals, "step", double(step + 1));
      push(ref_evals, "heldout_loss", e.loss);
      push(ref_evals, "heldout_accuracy", e.accuracy);
    }
    (void)ref_norm;

    // One variant per thread: its body touches only its own VariantRun (and reads the reference).
#pragma omp parallel for schedule(dynamic, 1) if (runs.size() > 1)
    for (size_t vi = 0; vi < runs.size(); ++vi) {
      auto& v = runs[vi];
      if (v.diverged_at >= 0) continue;
      std::vector<float> vgrad;
      if (shadow) {
        // The variant's arithmetic at the reference's weights: its own state otherwise (loss
        // scale, optimizer moments, delayed-scaling history), and nothing of it kept.
        RunState<float> sh = v.state.clone();
        sh.weights.assign(ref_before.begin(), ref_before.end());
        if (!v.recipe->has_master()) {
          QuantOptions o;
          quantize(v.recipe->weights.format, std::span<const float>(sh.weights), std::span<float>(sh.weights), o);
        }
        const std::vector<float> before = sh.weights;
        v.trainer->step(sh, b, step, &vgrad);
        const std::vector<double> g = to_double(vgrad);
        std::vector<double> d(before.size());
        for (size_t i = 0; i < d.size(); ++i) d[i] = double(sh.weights[i]) - double(before[i]);
        const double ge = rel_error(g, ref_grad), gc = cosine(g, ref_grad), ue = rel_error(d, ref_delta);
        const double uf = underflow_vs_reference(g, ref_grad);
        v.local_grad_err.push_back(ge);
        v.local_grad_cos.push_back(gc);
        v.local_update_err.push_back(ue);
        v.local_underflow.push_back(uf);
        double se = 0, sc = 1;
        if (v.unsplit) {
          RunState<float> one = v.state.clone();
          one.weights.assign(before.begin(), before.end());
          std::vector<float> g1;
          v.unsplit->step(one, b, step, &g1);
          const std::vector<double> g1d = to_double(g1);
          se = rel_error(g, g1d);
          sc = cosine(g, g1d);
        }
        v.split_grad_err.push_back(se);
        v.split_grad_cos.push_back(sc);
        push(v.local, "split_grad_rel_err", se);
        push(v.local, "split_grad_cosine", sc);
        push(v.local, "step", double(step));
        push(v.local, "grad_rel_err", ge);
        push(v.local, "grad_cosine", gc);
        push(v.local, "update_rel_err", ue);
        push(v.local, "weight_grad_underflow_vs_reference", uf);
      }
      const StepStats st = v.trainer->step(v.state, b, step, log || hist ? &vgrad : nullptr);
      for (size_t i = 0; i < kRoles; ++i) {
        v.roles[i] += st.roles[i];
        v.nonzero[i] += st.role_nonzero[i];
      }
      v.intended += st.updates_intended;
      v.lost += st.updates_lost;
      v.skipped += st.skipped;
      v.last_loss = st.loss;
      if constexpr (std::is_same_v<typename P::Var, Trainer<float>>)
        if (v.twin && v.twin->diverged_at < 0) step_twin(*v.twin, b, step, st.loss, v.state.weights, log);
      v.loss_window.push_back(st.loss);
      if (int(v.loss_window.size()) > window) v.loss_window.erase(v.loss_window.begin());
      p.observe(*v.trainer, v.layers, step, log);
      if (hist) {
        const std::vector<double> ag(v.trainer->last_activation_grads().begin(), v.trainer->last_activation_grads().end());
        v.histograms.push_back({{"step", step},
                                {"activation_grads", exponent_histogram(ag, v.recipe->activation_grads.format)},
                                {"weight_grads_unscaled", exponent_histogram(to_double(vgrad), v.recipe->weight_grads.format)}});
      }
      if (log) {
        const std::vector<double> w = to_double(v.state.weights);
        push(v.series, "step", double(step));
        push(v.series, "loss", st.loss);
        push(v.series, "loss_gap", st.loss - rs.loss);
        push(v.series, "weight_distance", rel_error(w, ref.weights));
        push(v.series, "drift_over_chaos_floor", rel_error(w, ref.weights) / chaos_dist);
        push(v.series, "grad_cosine_vs_reference", cosine(to_double(vgrad), ref_grad));
        push(v.series, "loss_scale", st.loss_scale);
        push(v.series, "skipped_steps", double(v.skipped));
        push(v.series, "stagnation", st.updates_intended ? double(st.updates_lost) / double(st.updates_intended) : 0.0);
        if (hooks.on_logged_step) {
          json rec = {{"seed", seed}, {"step", step}, {"variant", v.recipe->name}};
          for (const auto& [key, values] : v.series.items())
            if (key != "step") rec[key] = values.back();
          v.logged = std::move(rec);
        }
      }
      if (eval) {
        const EvalResult e = p.evaluate(*v.trainer, v.state);
        push(v.evals, "step", double(step + 1));
        push(v.evals, "heldout_loss", e.loss);
        push(v.evals, "heldout_accuracy", e.accuracy);
      }
      const bool blown = !std::isfinite(st.loss) ||
                         (st.loss > c.divergence_factor * rs.loss && st.loss > ref_initial_loss);
      if (blown) v.diverged_at = step;
    }
    // Outside the variant loop, in variant order: the stream's lines never depend on threads.
    if (hooks.on_logged_step)
      for (auto& v : runs)
        if (!v.logged.is_null()) hooks.on_logged_step(std::exchange(v.logged, json()));
    if (hooks.progress) hooks.progress(seed_index, step, n_steps);
    steps_completed = step + 1;
    if (stopping) break;
  }

  json out = json::object();
  const EvalResult ref_e = p.evaluate(ref_tr, ref);
  const double ref_final = window_mean(ref_window);
  const double chaos_final = rel_error(chaos.weights, ref.weights);
  out["seed"] = seed;
  out["steps_completed"] = steps_completed;
  out["reference"] = {{"final_loss", json_number(ref_final)},
                      {"last_loss", json_number(ref_last)},
                      {"initial_loss", json_number(ref_initial_loss)},
                      {"heldout_loss", json_number(ref_e.loss)},
                      {"heldout_accuracy", json_number(ref_e.accuracy)},
                      {"chaos_floor", json_number(chaos_final)},
                      {"series", ref_series},
                      {"evals", ref_evals}};
  json vars = json::array();
  for (auto& v : runs) {
    const EvalResult e = p.evaluate(*v.trainer, v.state);
    const double dist = rel_error(to_double(v.state.weights), ref.weights);
    uint64_t gflush = 0, gnz = 0;
    for (Role r : {Role::kActivationGrads, Role::kWeightGrads}) {
      gflush += v.roles[size_t(r)].underflow_to_zero;
      gnz += v.nonzero[size_t(r)];
    }
    const double final_loss = window_mean(v.loss_window);
    json summary = {{"final_loss", json_number(final_loss)},
                    {"heldout_loss", json_number(e.loss)},
                    {"heldout_accuracy", json_number(e.accuracy)},
                    {"loss_gap", json_number(final_loss - ref_final)},
                    {"heldout_loss_gap", json_number(e.loss - ref_e.loss)},
                    {"heldout_accuracy_gap", json_number(e.accuracy - ref_e.accuracy)},
                    {"local_grad_rel_err", json_number(window_mean(v.local_grad_err))},
                    {"local_grad_cosine", json_number(window_mean(v.local_grad_cos))},
                    {"local_update_rel_err", json_number(window_mean(v.local_update_err))},
                    {"local_weight_grad_underflow", json_number(window_mean(v.local_underflow))},
                    {"local_split_grad_rel_err", json_number(window_mean(v.split_grad_err))},
                    {"local_split_grad_cosine", json_number(v.split_grad_cos.empty() ? 1.0 : window_mean(v.split_grad_cos))},
                    {"weight_distance", json_number(dist)},
                    {"chaos_floor", json_number(chaos_final)},
                    {"drift_over_chaos_floor", json_number(dist / chaos_final)},
                    {"underflow_fraction", json_number(gnz ? double(gflush) / double(gnz) : 0.0)},
                    {"stagnation_fraction", json_number(v.intended ? double(v.lost) / double(v.intended) : 0.0)},
                    {"skipped_steps", v.skipped},
                    {"final_loss_scale", json_number(v.state.scaler.scale())},
                    {"diverged_at", v.diverged_at >= 0 ? json(v.diverged_at) : json(nullptr)}};
    json fp8 = json::array();
    for (size_t i = 0; i < v.state.delayed.size(); ++i)
      if (v.state.delayed[i]) {
        const auto& h = v.state.delayed[i]->history();
        fp8.push_back({{"operand", i}, {"scale", json_number(v.state.delayed[i]->scale())},
                       {"last_amax", json_number(h.empty() ? 0.0 : h.front())}});
      }
    vars.push_back({{"name", v.recipe->name},
                    {"summary", summary},
                    {"roles", roles_json(v.roles, v.nonzero)},
                    {"series", v.series},
                    {"local", v.local},
                    {"evals", v.evals},
                    {"histograms", v.histograms},
                    {"fp8_delayed_scales", fp8}});
    if (!v.layers.empty()) vars.back()["layers"] = v.layers;
    if (v.twin) vars.back()["backend"] = twin_json(*v.twin, hooks.executor_name);
  }
  out["variants"] = vars;
  return out;
}

const char* const kAggregated[] = {"final_loss",         "heldout_loss",       "heldout_accuracy",
                                   "loss_gap",           "heldout_loss_gap",   "heldout_accuracy_gap",
                                   "local_grad_rel_err", "local_grad_cosine",  "local_update_rel_err",
                                   "local_weight_grad_underflow", "local_split_grad_rel_err",
                                   "local_split_grad_cosine", "weight_distance", "chaos_floor",
                                   "drift_over_chaos_floor", "underflow_fraction", "stagnation_fraction",
                                   "skipped_steps",      "final_loss_scale"};

}  // namespace

namespace {

// The per-worker breakdown around the stored activations of one batch and of one micro-batch.
json memory_breakdown(const Recipe& r, size_t params, const OptimizerConfig& o, double act, double micro_act) {
  const double n = double(params);
  auto bytes = [](const Format& f, double count) { return count * f.bits() / 8.0; };
  double scale_overhead = 0;
  for (const GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad})
    for (const OperandSpec* op : {&g->a, &g->b})
      if (op->scaling == Scaling::kMx) scale_overhead += 1.0 / op->block;          // one E8M0 byte per block
      else if (op->scaling == Scaling::kNvfp4) scale_overhead += 1.0 / 16;         // one E4M3 byte per 16
      else if (op->scaling == Scaling::kRowwise || op->scaling == Scaling::kBlock2d) scale_overhead += 4.0 / op->block;
  const double weights = bytes(r.weights.format, n);
  const double master = r.has_master() ? bytes(r.master_format, n) : 0.0;
  const double kahan = !r.has_master() && r.update_rounding == UpdateRounding::kKahan ? bytes(r.weights.format, n) : 0.0;
  const double grads = bytes(r.weight_grads.format, n);
  const double states = bytes(r.optimizer_state.format, n) * (o.kind == "adamw" ? 2 : 1);
  // One worker's accumulation buffer beside the gradients (and its compensation), when N > 1.
  const AccumulationSpec& a = r.accumulation;
  const double accum = a.micro_batches > 1 ? bytes(a.buffer_format, n) * (a.rounding == BufferRounding::kKahan ? 2 : 1) : 0.0;
  // Per worker: everything is replicated, activations are those of one micro-batch.
  const double total = weights + master + kahan + grads + states + accum + micro_act;
  return {{"weights", weights},         {"master_weights", master}, {"kahan_compensation", kahan},
          {"gradients", grads},         {"optimizer_state", states}, {"accumulation_buffer", accum},
          {"activations_one_batch", act}, {"activations_one_micro_batch", micro_act},
          {"gemm_operand_scales_per_element_bytes", scale_overhead / 6.0}, {"total", total}};
}

int split_parts(const Recipe& r) { return r.parallel.workers * r.accumulation.micro_batches; }

}  // namespace

json memory_estimate(const Recipe& r, const MlpLayout& l, const OptimizerConfig& o, int batch) {
  // Stored activations of one batch: every layer's input, linear output and activation output.
  double acts = 0;
  for (const auto& s : l.layers) acts += double(batch) * (s.in + s.out + (s.hidden ? s.out : 0) + (s.layernorm || s.batchnorm ? s.out : 0));
  const double act_bytes = r.activations.format.bits() / 8.0;
  // Rows are the only batch-dependent factor.
  return memory_breakdown(r, l.param_count, o, acts * act_bytes, acts / split_parts(r) * act_bytes);
}

json memory_estimate(const Recipe& r, const TransformerLayout& l, const OptimizerConfig& o, int batch) {
  const double act = r.activations.format.bits() / 8.0, score = r.attention.scores.format.bits() / 8.0;
  const double norm = r.autocast ? 4.0 : act;  // layer_norm is on autocast's FP32 list
  return memory_breakdown(r, l.param_count, o, transformer_activation_bytes(l, batch, act, norm, score),
                          transformer_activation_bytes(l, batch / split_parts(r), act, norm, score));
}

nlohmann::json run_training(const TrainConfig& c, const RunHooks& hooks) {
  if (c.variants.empty()) throw std::invalid_argument("no recipes to run; give at least one");
  const bool transformer = c.model_type == "transformer";
  if (transformer && hooks.gemm_executor)
    throw std::invalid_argument("the " + hooks.executor_name +
                                " GEMM backend runs the MLP only; model.type transformer has its matrix products emulated");
  // Build everything that can fail before the first step.
  for (int s = 0; s < c.seeds; ++s) {
    const int train_rows = transformer ? TransformerProblem(c, c.seed + s).data.train_rows : MlpProblem(c, c.seed + s).data.train_count();
    if (c.batch > train_rows)
      throw std::invalid_argument(fmt::format("batch {} is larger than the training set ({} rows)", c.batch, train_rows));
    for (const Recipe& r : c.variants) check_split(r.parallel, r.accumulation, c.batch, r.name);
    for (const Recipe& r : c.variants)
      for (const GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad}) {
        parse_accum_model(g->accum);
        for (const OperandSpec* op : {&g->a, &g->b}) parse_block_scaling(operand_scheme(*op, r.margin));
      }
  }
  json runs = json::array();
  size_t parameters = 0;
  for (int s = 0; s < c.seeds; ++s) {
    if (s > 0 && hooks.stop && hooks.stop()) break;
    if (transformer) {
      TransformerProblem p(c, c.seed + s);
      parameters = p.layout.param_count;
      runs.push_back(run_seed(c, p, c.seed + s, s, hooks));
    } else {
      MlpProblem p(c, c.seed + s);
      parameters = p.layout.param_count;
      runs.push_back(run_seed(c, p, c.seed + s, s, hooks));
    }
    if (runs.back()["steps_completed"] != c.steps) break;
  }
  const MlpLayout l0 = transformer ? MlpLayout{} : MlpProblem(c, c.seed).layout;
  const TransformerLayout t0 = transformer ? TransformerProblem(c, c.seed).layout : TransformerLayout{};
  json variants = json::array();
  for (size_t vi = 0; vi < c.variants.size(); ++vi) {
    json agg = json::object(), ci = json::object();
    for (const char* key : kAggregated) {
      std::vector<double> xs;
      for (const auto& run : runs) xs.push_back(read_number(run["variants"][vi]["summary"][key]));
      const MeanCi m = mean_ci95(xs);
      agg[key] = json_number(m.mean);
      ci[key] = {json_number(m.lo), json_number(m.hi)};
    }
    json diverged = json::array();
    for (const auto& run : runs) diverged.push_back(run["variants"][vi]["summary"]["diverged_at"]);
    agg["diverged_at"] = c.seeds == 1 ? diverged[0] : diverged;
    json v = {{"name", c.variants[vi].name},
              {"preset", c.variants[vi].preset},
              {"summary", agg},
              {"split", {{"workers", c.variants[vi].parallel.workers},
                         {"micro_batches", c.variants[vi].accumulation.micro_batches}}}};
    v["memory_bytes"] = transformer ? memory_estimate(c.variants[vi], t0, c.optimizer, c.batch)
                                    : memory_estimate(c.variants[vi], l0, c.optimizer, c.batch);
    if (c.seeds > 1) v["summary_ci95"] = ci;
    variants.push_back(v);
  }
  return {{"parameters", parameters}, {"variants", variants}, {"runs", runs}};
}

std::string summary_table(const nlohmann::json& results) {
  std::string t = fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}\n", "variant",
                              "final", "heldout", "gap", "acc", "local_err", "drift/cf", "underflow", "skipped",
                              "diverged");
  for (const auto& v : results["variants"]) {
    const auto& s = v["summary"];
    auto num = [&](const char* k) { return read_number(s[k]); };
    std::string div = s["diverged_at"].is_null() ? "-" : s["diverged_at"].dump();
    t += fmt::format("{:<16} {:>10.4g} {:>10.4g} {:>+10.3g} {:>10.4f} {:>10.3g} {:>10.3g} {:>9.3g} {:>8.0f} {:>9}\n",
                     v["name"].get<std::string>(), num("final_loss"), num("heldout_loss"), num("loss_gap"),
                     num("heldout_accuracy"), num("local_grad_rel_err"), num("drift_over_chaos_floor"),
                     num("underflow_fraction"), num("skipped_steps"), div);
  }
  // Split variants: the error the split alone adds, and the activation memory it saves.
  bool any_split = false;
  for (const auto& v : results["variants"])
    any_split |= v.contains("split") && v["split"]["workers"].get<int>() * v["split"]["micro_batches"].get<int>() > 1;
  if (!any_split) return t;
  t += fmt::format("\n{:<20} {:>9} {:>12} {:>14} {:>14} {:>14}\n", "variant", "W x N", "split_err", "split_cosine",
                   "act_bytes_mb", "act_bytes_all");
  for (const auto& v : results["variants"]) {
    const auto& s = v["summary"];
    t += fmt::format("{:<20} {:>9} {:>12.3g} {:>14.8f} {:>14.0f} {:>14.0f}\n", v["name"].get<std::string>(),
                     fmt::format("{} x {}", v["split"]["workers"].get<int>(), v["split"]["micro_batches"].get<int>()),
                     read_number(s["local_split_grad_rel_err"]), read_number(s["local_split_grad_cosine"]),
                     v["memory_bytes"]["activations_one_micro_batch"].get<double>(),
                     v["memory_bytes"]["activations_one_batch"].get<double>());
  }
  return t;
}

}  // namespace precsim

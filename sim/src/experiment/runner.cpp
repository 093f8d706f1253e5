#include "precsim/sim/experiment/runner.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <nlohmann/json.hpp>

#include "mlp_problem.h"
#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/reports/report.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/problem_shape.h"
#include "precsim/sim/train/operand_quant.h"
#include "precsim/sim/train/recipe_parts.h"
#include "seed_report.h"
#include "seed_run.h"
#include "transformer_problem.h"

namespace precsim {
namespace {

// An evaluation after step `step` (so after step + 1 steps).
void push_eval(EvalSeries& s, int64_t step, const EvalResult& e) {
  s.step.push_back(double(step + 1));
  s.heldout_loss.push_back(e.loss);
  s.heldout_accuracy.push_back(e.accuracy);
}

template <class P>
ReferenceRun<typename P::Ref> make_reference(const P& p, int64_t n_steps, uint64_t seed) {
  ReferenceRun<typename P::Ref> r;
  r.trainer = p.reference(n_steps);
  r.chaos_trainer = p.reference(n_steps);
  r.state = r.trainer->init_state(p.init);
  r.chaos = r.chaos_trainer->init_state(perturb_one_ulp(p.init, seed));
  return r;
}

template <class P>
VariantRun<typename P::Var> make_variant(const P& p, const Recipe& r, int64_t n_steps, const RunHooks& hooks) {
  VariantRun<typename P::Var> v;
  v.recipe = &r;
  v.trainer = p.variant(r, n_steps);
  v.state = v.trainer->init_state(p.init);
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
      v.twin->state = v.twin->trainer->init_state(p.init);
    }
  return v;
}

// The reference's and the chaos control's step, and the reference's series and evaluation. They
// are independent runs: each takes one thread (the GEMMs inside run single-threaded: OpenMP regions
// do not nest), so a step forks twice rather than once per matrix product, which starved small
// models of both cores (idle spinning at every fork). Nothing is shared, so results do not depend on it.
template <class P, class B>
void step_reference(ReferenceRun<typename P::Ref>& r, P& p, const B& b, int64_t step, const StepPlan& f, int window) {
  r.before = r.state.weights;
  StepStats rs, cs;
#pragma omp parallel sections
  {
#pragma omp section
    rs = r.trainer->step(r.state, b, step, &r.grad);
#pragma omp section
    cs = r.chaos_trainer->step(r.chaos, b, step, nullptr);
  }
  r.delta.resize(r.state.weights.size());
  for (size_t i = 0; i < r.delta.size(); ++i) r.delta[i] = r.state.weights[i] - r.before[i];
  if (step == 0) r.initial_loss = rs.loss;
  r.last_loss = rs.loss;
  push_window(r.window, rs.loss, window);
  r.chaos_distance = rel_error(r.chaos.weights, r.state.weights);
  if (f.log) {
    r.series.step.push_back(double(step));
    r.series.loss.push_back(rs.loss);
    r.series.chaos_loss.push_back(cs.loss);
    r.series.chaos_weight_distance.push_back(r.chaos_distance);
    r.series.grad_norm.push_back(rs.grad_norm);
  }
  if (f.eval) push_eval(r.evals, step, p.evaluate(*r.trainer, r.state));
}

// The variant's arithmetic at the reference's weights: its own state otherwise (loss scale,
// optimizer moments, delayed-scaling history), and nothing of it kept. Records the local errors
// against the reference's gradient and update, and against the variant's own unsplit step.
template <class Var, class Ref, class B>
void shadow_step(VariantRun<Var>& v, const ReferenceRun<Ref>& ref, const B& b, int64_t step, std::vector<float>& vgrad) {
  RunState<float> sh = v.state.clone();
  sh.weights.assign(ref.before.begin(), ref.before.end());
  if (!v.recipe->has_master()) {
    QuantOptions o;
    quantize(v.recipe->weights.format, std::span<const float>(sh.weights), std::span<float>(sh.weights), o);
  }
  const std::vector<float> before = sh.weights;
  v.trainer->step(sh, b, step, &vgrad);
  const std::vector<double> g = to_double(vgrad);
  std::vector<double> d(before.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = double(sh.weights[i]) - double(before[i]);
  const double ge = rel_error(g, ref.grad), gc = cosine(g, ref.grad), ue = rel_error(d, ref.delta);
  const double uf = underflow_vs_reference(g, ref.grad);
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
  LocalSeries& l = v.local;
  l.step.push_back(double(step));
  l.grad_rel_err.push_back(ge);
  l.grad_cosine.push_back(gc);
  l.update_rel_err.push_back(ue);
  l.weight_grad_underflow_vs_reference.push_back(uf);
  l.split_grad_rel_err.push_back(se);
  l.split_grad_cosine.push_back(sc);
}

// A logged step's series of the variant (and its record for hooks.on_logged_step).
template <class Var, class Ref>
void log_variant(VariantRun<Var>& v, const ReferenceRun<Ref>& ref, const StepStats& st, double ref_loss,
                 const std::vector<float>& vgrad, int64_t step, uint64_t seed, const RunHooks& hooks) {
  const std::vector<double> w = to_double(v.state.weights);
  VariantSeries& s = v.series;
  s.step.push_back(double(step));
  s.loss.push_back(st.loss);
  s.loss_gap.push_back(st.loss - ref_loss);
  s.weight_distance.push_back(rel_error(w, ref.state.weights));
  s.drift_over_chaos_floor.push_back(rel_error(w, ref.state.weights) / ref.chaos_distance);
  s.grad_cosine_vs_reference.push_back(cosine(to_double(vgrad), ref.grad));
  s.loss_scale.push_back(st.loss_scale);
  s.skipped_steps.push_back(double(v.skipped));
  s.stagnation.push_back(st.updates_intended ? double(st.updates_lost) / double(st.updates_intended) : 0.0);
  if (hooks.on_logged_step) v.logged = logged_step_json(s, seed, step, v.recipe->name);
}

// The variant's own step and its totals, twin, per-layer statistics and histograms.
template <class P, class B>
StepStats train_variant(VariantRun<typename P::Var>& v, const P& p, const B& b, int64_t step, const StepPlan& f,
                        std::vector<float>& vgrad, int window) {
  const StepStats st = v.trainer->step(v.state, b, step, f.log || f.hist ? &vgrad : nullptr);
  for (size_t i = 0; i < kRoles; ++i) {
    v.roles[i] += st.roles[i];
    v.nonzero[i] += st.role_nonzero[i];
  }
  v.intended += st.updates_intended;
  v.lost += st.updates_lost;
  v.skipped += st.skipped;
  v.last_loss = st.loss;
  if constexpr (std::is_same_v<typename P::Var, Trainer<float>>)
    if (v.twin && v.twin->diverged_at < 0) step_twin(*v.twin, b, step, st.loss, v.state.weights, f.log);
  push_window(v.loss_window, st.loss, window);
  p.observe(*v.trainer, v.layers, step, f.log);
  if (f.hist) {
    const auto& act = v.trainer->last_activation_grads();
    const std::vector<double> ag(act.begin(), act.end());
    v.histograms.push_back({step, exponent_histogram(ag, v.recipe->activation_grads.format),
                            exponent_histogram(to_double(vgrad), v.recipe->weight_grads.format)});
  }
  return st;
}

// One variant's whole step: shadow step, its own step, log, evaluation, divergence. Touches only
// its own VariantRun (and reads the reference), so variants may run on separate threads.
template <class P, class B>
void step_variant(VariantRun<typename P::Var>& v, const ReferenceRun<typename P::Ref>& ref, P& p, const B& b,
                  int64_t step, const StepPlan& f, const TrainConfig& c, uint64_t seed, const RunHooks& hooks,
                  int window) {
  if (v.diverged_at >= 0) return;
  std::vector<float> vgrad;
  if (f.shadow) shadow_step(v, ref, b, step, vgrad);
  const StepStats st = train_variant(v, p, b, step, f, vgrad, window);
  if (f.log) log_variant(v, ref, st, ref.last_loss, vgrad, step, seed, hooks);
  if (f.eval) push_eval(v.evals, step, p.evaluate(*v.trainer, v.state));
  const bool blown = !std::isfinite(st.loss) ||
                     (st.loss > c.divergence_factor * ref.last_loss && st.loss > ref.initial_loss);
  if (blown) v.diverged_at = step;
}

// One variant's results at the end of a seed, against the reference's.
template <class P>
VariantRunResults variant_results(const P& p, VariantRun<typename P::Var>& v, const ReferenceResults& ref,
                                  const ReferenceRun<typename P::Ref>& run, const RunHooks& hooks) {
  const EvalResult e = p.evaluate(*v.trainer, v.state);
  VariantSummaryInput in;
  in.final_loss = window_mean(v.loss_window);
  in.heldout_loss = e.loss;
  in.heldout_accuracy = e.accuracy;
  in.ref_final = ref.final_loss;
  in.ref_heldout_loss = ref.heldout_loss;
  in.ref_heldout_accuracy = ref.heldout_accuracy;
  in.weight_distance = rel_error(to_double(v.state.weights), run.state.weights);
  in.chaos_floor = ref.chaos_floor;
  in.local = &v.local;
  in.roles = &v.roles;
  in.nonzero = &v.nonzero;
  in.intended = v.intended;
  in.lost = v.lost;
  in.skipped = v.skipped;
  in.final_loss_scale = v.state.scaler.scale();
  in.diverged_at = v.diverged_at;
  VariantRunResults out;
  out.name = v.recipe->name;
  out.summary = variant_summary(in);
  out.roles = v.roles;
  out.nonzero = v.nonzero;
  out.series = std::move(v.series);
  out.local = std::move(v.local);
  out.evals = std::move(v.evals);
  out.histograms = std::move(v.histograms);
  out.fp8_delayed_scales = fp8_delayed_scales(v.state);
  if (!v.layers.step.empty()) out.layers = std::move(v.layers);
  if (v.twin) out.backend = twin_results(*v.twin, hooks.executor_name);
  return out;
}

// The seed's results: the reference's summary and every variant's.
template <class P>
SeedResults seed_results(const P& p, ReferenceRun<typename P::Ref>& ref, std::vector<VariantRun<typename P::Var>>& runs,
                         uint64_t seed, int64_t steps_completed, const RunHooks& hooks) {
  const EvalResult ref_e = p.evaluate(*ref.trainer, ref.state);
  SeedResults out;
  out.seed = seed;
  out.steps_completed = steps_completed;
  ReferenceResults& r = out.reference;
  r.final_loss = window_mean(ref.window);
  r.last_loss = ref.last_loss;
  r.initial_loss = ref.initial_loss;
  r.heldout_loss = ref_e.loss;
  r.heldout_accuracy = ref_e.accuracy;
  r.chaos_floor = rel_error(ref.chaos.weights, ref.state.weights);
  for (auto& v : runs) out.variants.push_back(variant_results(p, v, r, ref, hooks));
  r.series = std::move(ref.series);
  r.evals = std::move(ref.evals);
  return out;
}

// One seed of the whole experiment: every step, the reference, then the variants, then the logged
// records and progress; then the seed's results.
template <class P>
SeedResults run_seed(const TrainConfig& c, P& p, uint64_t seed, int seed_index, const RunHooks& hooks) {
  const Schedule schedule(c);
  ReferenceRun<typename P::Ref> ref = make_reference(p, c.steps, seed);
  std::vector<VariantRun<typename P::Var>> runs;
  for (const Recipe& r : c.variants) runs.push_back(make_variant(p, r, c.steps, hooks));
  int64_t steps_completed = 0;
  for (int64_t step = 0; step < c.steps; ++step) {
    const bool stopping = hooks.stop && hooks.stop();
    const auto& b = p.batch(step);
    const StepPlan f = schedule.at(step, stopping);
    step_reference(ref, p, b, step, f, schedule.window());
#pragma omp parallel for schedule(dynamic, 1) if (runs.size() > 1)
    for (size_t vi = 0; vi < runs.size(); ++vi)
      step_variant(runs[vi], ref, p, b, step, f, c, seed, hooks, schedule.window());
    // Outside the variant loop, in variant order: the stream's lines never depend on threads.
    if (hooks.on_logged_step)
      for (auto& v : runs)
        if (!v.logged.is_null()) hooks.on_logged_step(std::exchange(v.logged, json()));
    if (hooks.progress) hooks.progress(seed_index, step, c.steps);
    steps_completed = step + 1;
    if (stopping) break;
  }
  return seed_results(p, ref, runs, seed, steps_completed, hooks);
}

// The problem's sizes, read once from the configuration (an npy or text data set's files are read
// for their shapes here, and not again after the runs for the memory estimate).
struct ProblemSizes {
  int train_rows = 0;
  MlpLayout mlp;
  TransformerLayout transformer;
};

ProblemSizes problem_sizes(const TrainConfig& c, bool transformer) {
  ProblemSizes z;
  if (transformer) {
    const TransformerShape sh = transformer_shape(c);
    z.train_rows = sh.data.train_rows;
    z.transformer = sh.layout;
  } else {
    const MlpShape sh = mlp_shape(c);
    z.train_rows = sh.data.train_rows;
    z.mlp = sh.layout;
  }
  return z;
}

// Everything that can fail before the first step and after the recipes were read (which resolved
// their accumulation models and operand schemes): the training set's size, each recipe's split and
// per-part names (the data's and the model's configuration were checked by problem_sizes). From
// the configuration alone: the sizes are the same for every seed.
void check_config(const TrainConfig& c, bool transformer, int train_rows) {
  if (c.batch > train_rows)
    throw std::invalid_argument(fmt::format("batch {} is larger than the training set ({} rows)", c.batch, train_rows));
  for (const Recipe& r : c.variants) check_split(r.parallel, r.accumulation, c.batch, r.name);
  const int layers = transformer ? c.transformer.layers : int(c.model.hidden.size()) + 1;
  for (const Recipe& r : c.variants) (void)PartRecipes(r, transformer, layers);
}

std::vector<MemoryEstimate> memory_estimates(const TrainConfig& c, bool transformer, const ProblemSizes& z) {
  std::vector<MemoryEstimate> m;
  for (const Recipe& r : c.variants)
    m.push_back(transformer ? memory_estimate(r, z.transformer, c.optimizer, c.batch)
                            : memory_estimate(r, z.mlp, c.optimizer, c.batch));
  return m;
}

}  // namespace

TrainResults run_training(const TrainConfig& c, const RunHooks& hooks) {
  if (c.variants.empty()) throw std::invalid_argument("no recipes to run; give at least one");
  const bool transformer = c.model_type == ModelKind::kTransformer;
  if (transformer && hooks.gemm_executor)
    throw std::invalid_argument("the " + hooks.executor_name +
                                " GEMM backend runs the MLP only; model.type transformer has its matrix products emulated");
  const ProblemSizes sizes = problem_sizes(c, transformer);
  check_config(c, transformer, sizes.train_rows);
  TrainResults out;
  out.seeds = c.seeds;
  for (int s = 0; s < c.seeds; ++s) {
    if (s > 0 && hooks.stop && hooks.stop()) break;
    if (transformer) {
      TransformerProblem p(c, c.seed + s);
      out.parameters = p.layout.param_count;
      out.runs.push_back(run_seed(c, p, c.seed + s, s, hooks));
    } else {
      MlpProblem p(c, c.seed + s);
      out.parameters = p.layout.param_count;
      out.runs.push_back(run_seed(c, p, c.seed + s, s, hooks));
    }
    if (out.runs.back().steps_completed != c.steps) break;
  }
  out.variants = aggregate_variants(c.variants, out.runs, memory_estimates(c, transformer, sizes));
  return out;
}

nlohmann::json run_training_json(const TrainConfig& c, const RunHooks& hooks) {
  return train_results_json(run_training(c, hooks));
}

}  // namespace precsim

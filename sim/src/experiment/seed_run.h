// The runs of one seed of the experiment, and what a step does to each: the FP64 reference and its
// chaos control, each variant (with its shadow step at the reference's weights, its unsplit copy
// and its optional twin on another GEMM executor). runner.cpp's run_seed drives them in lockstep.
#pragma once

#include <cmath>
#include <limits>
#include <set>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "precsim/formats/quantize.h"
#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/hw/gpu_train.h"
#include "precsim/sim/experiment/train_results.h"
#include "precsim/sim/train/step_types.h"
#include "seed_report.h"

namespace precsim {

using nlohmann::json;

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// One FP32 ulp of each weight, in a keyed random direction (the chaos control's start).
inline std::vector<double> perturb_one_ulp(const std::vector<double>& w, uint64_t seed) {
  std::vector<double> p(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const float f = static_cast<float>(w[i]);
    const bool up = uniform01(seed, 9001, i) < 0.5;
    p[i] = std::nextafter(f, up ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
  }
  return p;
}

// A variant's twin with its matrix products on another backend (RunHooks::gemm_executor): the same
// recipe, initial weights and batches, compared with the emulated variant after every step.
template <class Var>
struct BackendTwin {
  std::unique_ptr<Var> trainer;
  std::shared_ptr<GemmExecutor> backend;
  RunState<float> state;
  TwinSeries series;
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
  VariantSeries series;
  LocalSeries local;
  EvalSeries evals;
  std::vector<GradHistograms> histograms;
  // A split variant's own arithmetic without the split (1 worker, 1 micro-batch), at shadow steps.
  std::unique_ptr<Var> unsplit;
  json logged;  // this step's record for hooks.on_logged_step, emitted after the parallel loop
  LayerSeries layers;  // per-layer series of models that have layers to report (transformer)
  std::unique_ptr<BackendTwin<Var>> twin;
};


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
  t.series.step.push_back(double(step));
  t.series.loss.push_back(st.loss);
  t.series.loss_diff.push_back(diff);
  t.series.weight_rel_err.push_back(t.weight_rel_err);
  t.series.loss_scale.push_back(st.loss_scale);
}

// What a report records of a backend's calls: the cuBLASLt executor's algorithms and counts.
inline json backend_calls(const GemmExecutor& e) {
  const auto* cublas = dynamic_cast<const CublasGemmExecutor*>(&e);
  return cublas ? cublas->report() : json::object();
}

template <class Var>
TwinResults twin_results(const BackendTwin<Var>& t, const std::string& name) {
  TwinResults r;
  r.name = name;
  r.last_loss = t.last_loss;
  r.max_abs_loss_diff = t.max_abs_loss_diff;
  r.max_weight_rel_err = t.max_weight_rel_err;
  r.final_weight_rel_err = t.weight_rel_err;
  r.skipped_steps = t.skipped;
  if (t.diverged_at >= 0) r.diverged_at = t.diverged_at;
  r.series = t.series;
  r.calls = backend_calls(*t.backend);
  return r;
}

// What a step records besides training: a logged step, a shadow step, an evaluation, histograms.
struct StepPlan {
  bool log = false, shadow = false, eval = false, hist = false;
};

// The schedule of a run: logging every log_every steps (about 200 points by default), evaluation
// every eval_every (10 by default), shadow steps every shadow_every, histograms at the listed steps
// (first and last by default), and the window of the final-loss mean (the last tenth of the steps).
class Schedule {
 public:
  explicit Schedule(const TrainConfig& c)
      : n_steps_(c.steps),
        log_every_(c.log_every > 0 ? c.log_every : int(std::max<int64_t>(1, (c.steps + 199) / 200))),
        eval_every_(c.eval_every > 0 ? c.eval_every : int(std::max<int64_t>(1, c.steps / 10))),
        shadow_every_(c.shadow_every),
        hist_steps_(c.histogram_steps.begin(), c.histogram_steps.end()),
        window_(int(std::max<int64_t>(1, c.steps / 10))) {
    if (c.histogram_steps.empty()) hist_steps_ = {0, n_steps_ - 1};
  }
  // A run that is stopping logs and evaluates its last step.
  StepPlan at(int64_t step, bool stopping) const {
    StepPlan f;
    f.log = step % log_every_ == 0 || step == n_steps_ - 1 || stopping;
    f.shadow = shadow_every_ > 0 && step % shadow_every_ == 0;
    f.eval = (step + 1) % eval_every_ == 0 || step == n_steps_ - 1 || stopping;
    f.hist = hist_steps_.count(step) > 0;
    return f;
  }
  int window() const { return window_; }

 private:
  int64_t n_steps_;
  int log_every_, eval_every_, shadow_every_;
  std::set<int64_t> hist_steps_;
  int window_;
};

// Appends v to the window of the last `window` values.
inline void push_window(std::vector<double>& w, double v, int window) {
  w.push_back(v);
  if (int(w.size()) > window) w.erase(w.begin());
}

// The FP64 reference and its chaos control (started one FP32 ulp away), and what the variants read
// of the reference's current step.
template <class Ref>
struct ReferenceRun {
  std::unique_ptr<Ref> trainer, chaos_trainer;
  RunState<double> state, chaos;
  ReferenceSeries series;
  EvalSeries evals;
  std::vector<double> window;
  double initial_loss = 0, last_loss = 0;
  double chaos_distance = 0;  // this step's relative distance of the chaos control's weights
  std::vector<double> grad;   // this step's unscaled gradient
  std::vector<double> before, delta;  // the weights before this step, and the step's update
};

}  // namespace precsim

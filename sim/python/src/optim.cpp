// The end of a training step as the trainers compute it (train/weight_update.h finish_step):
// unscaling with the loss scaler, the inf/NaN check that skips a step, gradient-norm clipping, the
// optimizer, the rounding of optimizer states, master copy and stored weights, and the scaler's
// update. Bound so that a Python caller (and the tests against torch.optim and GradScaler) runs the
// trainers' own code on gradients of its choosing.
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "precsim/sim/train/optimizer.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/step_types.h"
#include "precsim/sim/train/weight_update.h"
#include "precsim/sim/train/optimizer_json.h"
#include "py_common.h"
#include "py_json.h"

namespace precsim::py {
namespace {

class StepEnd {
 public:
  StepEnd(Array<const float> params, nb::handle optimizer, const Recipe& recipe, uint64_t seed)
      : recipe_(recipe), seed_(seed) {
    const nlohmann::json j = json_from_py(optimizer, "optimizer");
    try {
      opt_ = optimizer_config_from_json(j);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(std::string("optimizer: ") + e.what());
    }
    const std::vector<double> p(params.data(), params.data() + params.size());
    state_ = initial_state<float>(p, &recipe_);
  }

  nb::dict step(Array<const float> grads, double lr) {
    if (grads.size() != state_.weights.size())
      throw std::invalid_argument("grads has " + std::to_string(grads.size()) + " elements; the parameters have " +
                                  std::to_string(state_.weights.size()));
    if (!(lr > 0)) lr = opt_.lr;
    std::vector<float> g(grads.data(), grads.data() + grads.size());
    StepStats st;
    st.loss_scale = state_.scaler.scale();
    {
      nb::gil_scoped_release release;
      finish_step<float>(state_, g, &recipe_, opt_, lr, seed_, uint64_t(steps_), st, nullptr);
    }
    ++steps_;
    nb::dict out;
    out["found_inf"] = st.found_inf;
    out["skipped"] = st.skipped;
    out["loss_scale"] = st.loss_scale;
    out["grad_norm"] = st.grad_norm;
    out["updates_intended"] = st.updates_intended;
    out["updates_lost"] = st.updates_lost;
    return out;
  }

  const RunState<float>& state() const { return state_; }
  int64_t steps() const { return steps_; }

 private:
  Recipe recipe_;
  OptimizerConfig opt_;
  uint64_t seed_;
  RunState<float> state_;
  int64_t steps_ = 0;
};

}  // namespace

void bind_optim(nb::module_& m) {
  nb::class_<StepEnd>(m, "StepEnd", "The end of a training step (train/weight_update.h finish_step) on a flat FP32 "
                                    "parameter vector.")
      .def(nb::init<Array<const float>, nb::handle, const Recipe&, uint64_t>(), nb::arg("params"),
           nb::arg("optimizer"), nb::arg("recipe"), nb::arg("seed"))
      .def("step", &StepEnd::step, nb::arg("grads").noconvert(), nb::arg("lr"))
      .def("get_weights", [](const StepEnd& s) { return owned_array(s.state().weights, {s.state().weights.size()}); })
      .def("get_m", [](const StepEnd& s) { return owned_array(s.state().m, {s.state().m.size()}); })
      .def("get_v", [](const StepEnd& s) { return owned_array(s.state().v, {s.state().v.size()}); })
      .def_prop_ro("loss_scale", [](const StepEnd& s) { return s.state().scaler.scale(); })
      .def_prop_ro("growth_tracker", [](const StepEnd& s) { return s.state().scaler.growth_tracker(); })
      .def_prop_ro("optimizer_steps", [](const StepEnd& s) { return s.state().opt_steps; })
      .def_prop_ro("steps", &StepEnd::steps);
}

}  // namespace precsim::py

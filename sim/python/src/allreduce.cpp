// Simulated data-parallel all-reduce over one array per rank.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <span>
#include <stdexcept>
#include <vector>

#include "precsim/sim/analysis/allreduce_error.h"
#include "precsim/sim/parallel/allreduce.h"
#include "py_common.h"

namespace precsim::py {

void bind_allreduce(nb::module_& m) {
  m.def("allreduce", [](std::vector<Array<const float>> grads, const std::string& algorithm,
                        const std::string& format, const std::string& average, const std::string& hook) {
    AllReduceConfig cfg;
    cfg.algorithm = parse_allreduce_algorithm(algorithm);
    cfg.buffer = format_by_name(format);
    cfg.average = parse_average_mode(average);
    cfg.hook = parse_compress_hook(hook);
    cfg.workers = int(grads.size());
    std::vector<std::span<const float>> spans;
    for (const auto& g : grads) spans.emplace_back(g.data(), g.size());
    AllReduceResult r;
    ReductionError err;
    {
      nb::gil_scoped_release release;
      r = allreduce(spans, cfg);
      // Against the exact sum (or mean), as `precsim allreduce` reports it: rank 0's result.
      std::vector<std::vector<float>> copies;
      for (const auto& g : spans) copies.emplace_back(g.begin(), g.end());
      const std::vector<double> exact =
          exact_reduction(copies, cfg.average == AverageMode::kSum ? 1.0 : double(cfg.workers));
      if (!r.ranks.empty()) err = reduction_error(r.ranks[0], exact);
    }
    // Every rank's buffer as a NumPy array that owns its copy.
    nb::list ranks;
    for (auto& v : r.ranks) {
      const size_t n = v.size();
      ranks.append(owned_array(std::move(v), {n}));
    }
    nb::dict d;
    d["ranks"] = ranks;
    d["ranks_identical"] = r.ranks_identical;
    d["scale"] = r.scale;
    d["stats"] = r.stats;
    d["nonzero_inputs"] = r.nonzero_inputs;
    nb::dict e;
    e["rel_err_norm"] = err.rel_err_norm;
    e["rel_err_max"] = err.rel_err_max;
    e["mean_rel_bias"] = err.mean_rel_bias;
    d["error"] = e;
    return d;
  }, nb::arg("grads"), nb::arg("algorithm"), nb::arg("format"), nb::arg("average"), nb::arg("hook"));
  m.def("fsdp_predivide_factor", &fsdp_predivide_factor, nb::arg("workers"));
}

}  // namespace precsim::py

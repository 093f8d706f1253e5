// Simulated data-parallel all-reduce over one array per rank.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <span>
#include <stdexcept>
#include <vector>

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
    {
      nb::gil_scoped_release release;
      r = allreduce(spans, cfg);
    }
    // Every rank's buffer as a NumPy array that owns its copy.
    nb::list ranks;
    for (auto& v : r.ranks) {
      auto* owned = new std::vector<float>(std::move(v));
      nb::capsule del(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
      ranks.append(nb::ndarray<nb::numpy, float, nb::ndim<1>>(owned->data(), {owned->size()}, del));
    }
    nb::dict d;
    d["ranks"] = ranks;
    d["ranks_identical"] = r.ranks_identical;
    d["scale"] = r.scale;
    d["stats"] = r.stats;
    d["nonzero_inputs"] = r.nonzero_inputs;
    return d;
  }, nb::arg("grads"), nb::arg("algorithm"), nb::arg("format"), nb::arg("average"), nb::arg("hook"));
  m.def("fsdp_predivide_factor", &fsdp_predivide_factor, nb::arg("workers"));
}

}  // namespace precsim::py

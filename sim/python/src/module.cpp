// precsim._precsim: the engine's functions over NumPy buffers. Every number comes from the C++
// libraries; the Python package (sim/python/precsim) only checks dtypes and shapes and shapes the
// results.
#include <omp.h>

#include <string_view>

#include "precsim/reports/report.h"
#include "py_common.h"

namespace precsim::py {

QuantOptions make_options(const std::string& rounding, const std::string& overflow, bool flush_subnormals,
                          int sr_bits, uint64_t seed, const KeyTuple& key) {
  QuantOptions o;
  o.rounding = parse_rounding(rounding);
  o.overflow = parse_overflow(overflow);
  if (sr_bits < 1 || sr_bits > 32)
    throw std::invalid_argument("sr_bits " + std::to_string(sr_bits) + " is out of range; allowed: 1..32");
  o.flush_subnormals = flush_subnormals;
  o.sr_bits = sr_bits;
  o.sr_key = SrKey{seed, std::get<0>(key), std::get<1>(key), std::get<2>(key)};
  return o;
}

size_t element_count(const AnyArray& a) {
  size_t n = 1;
  for (size_t i = 0; i < a.ndim(); ++i) n *= a.shape(i);
  return n;
}

}  // namespace precsim::py

NB_MODULE(_precsim, m) {
  using namespace precsim::py;
  // Layers held by torch modules and autograd graphs may still be alive at interpreter exit.
  nb::set_leak_warnings(false);
  m.doc() = "precsim's C++ engine (formats, block scaling, GEMM and all-reduce emulation, training, reports)";
  // The string `precsim --version` prints before the commit, so that the two never disagree.
  const std::string_view version = precsim::precsim_version();
  m.attr("__version__") = nb::str(version.data(), version.size());
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw std::invalid_argument("threads " + std::to_string(n) + " is out of range; allowed: 1 or more");
    omp_set_num_threads(n);
  }, nb::arg("n"), "Worker threads of every later call; results do not depend on it.");
  m.def("get_num_threads", [] { return omp_get_max_threads(); });
  bind_json(m);
  bind_recipe(m);  // before the bindings that take a TypedRecipe
  bind_formats(m);
  bind_arrays(m);
  bind_block(m);
  bind_gemm(m);
  bind_allreduce(m);
  bind_reports(m);
  bind_linear(m);
  bind_optim(m);
}

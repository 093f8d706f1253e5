// Emulated matrix products and dot products under an accumulation model.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>
#include <cmath>
#include <optional>
#include <span>
#include <stdexcept>

#include "precsim/formats/rounding.h"
#include "precsim/reports/report.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "precsim/sim/accum/mma.h"
#include "py_common.h"
#include "py_json.h"
#include "signals.h"

namespace precsim::py {
namespace {

InputPolicy parse_policy(const std::string& s) {
  if (s == "check") return InputPolicy::kCheck;
  if (s == "round") return InputPolicy::kRound;
  if (s == "trust") return InputPolicy::kTrust;
  throw std::invalid_argument("unknown input policy '" + s + "'; allowed: check, round, trust");
}

// Block scales of an operand whose op() has `mn` rows (A) or columns (B): one decode scale per
// block_mn x block_k block, the array (ceil(mn / block_mn), ceil(k / block_k)) row-major.
BlockScales scales_of(const std::optional<Array<const float>>& s, const char* name, int64_t mn, int64_t k,
                      int64_t block_k, int64_t block_mn, float tensor_scale) {
  BlockScales b;
  b.tensor_scale = tensor_scale;
  if (!s) return b;
  if (block_k < 1 || block_mn < 1)
    throw std::invalid_argument(std::string(name) + ": block_k " + std::to_string(block_k) + " and block_mn " +
                                std::to_string(block_mn) + " must be at least 1");
  const int64_t rows = (mn + block_mn - 1) / block_mn, cols = (k + block_k - 1) / block_k;
  if (s->ndim() != 2 || int64_t(s->shape(0)) != rows || int64_t(s->shape(1)) != cols)
    throw std::invalid_argument(std::string(name) + " must have shape (" + std::to_string(rows) + ", " +
                                std::to_string(cols) + ") for block_k " + std::to_string(block_k) + " and block_mn " +
                                std::to_string(block_mn));
  b.scale = s->data();
  b.block_k = block_k;
  b.block_mn = block_mn;
  b.ld = cols;
  return b;
}

struct GemmCall {
  std::string model, a_format, b_format, out_format, input_policy, out_rounding, out_overflow;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 0;
  std::optional<Array<const float>> a_scales, b_scales;
  int64_t block_k = 0, a_block_mn = 1, b_block_mn = 1;
  float a_tensor_scale = 1, b_tensor_scale = 1;
};

template <class C>
nb::dict run_gemm(const GemmCall& call, Array<const float> a, Array<const float> b, Array<C> c, int64_t m, int64_t n,
                  int64_t k) {
  const AccumModel model = parse_accum_model(call.model);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.trans_a = call.trans_a, g.trans_b = call.trans_b;
  g.a_format = format_by_name(call.a_format);
  g.b_format = format_by_name(call.b_format);
  g.out_format = format_by_name(call.out_format);
  g.input_policy = parse_policy(call.input_policy);
  g.out_options.rounding = parse_rounding(call.out_rounding);
  g.out_options.overflow = parse_overflow(call.out_overflow);
  g.alpha = call.alpha, g.beta = call.beta;
  g.a_scales = scales_of(call.a_scales, "a_scales", m, k, call.block_k, call.a_block_mn, call.a_tensor_scale);
  g.b_scales = scales_of(call.b_scales, "b_scales", n, k, call.block_k, call.b_block_mn, call.b_tensor_scale);
  if (a.size() != size_t(m * k) || b.size() != size_t(k * n) || c.size() != size_t(m * n))
    throw std::invalid_argument("operand sizes do not match m, n, k");
  // Ctrl-C: the product stops between chunks of rows and the KeyboardInterrupt is raised.
  SignalPoll signals;
  g.stop = [&signals] { return signals.poll(); };
  GemmStats st;
  {
    nb::gil_scoped_release release;
    st = gemm(model, g, a.data(), b.data(), c.data());
  }
  if (signals.raised()) signals.rethrow();
  nb::dict d;
  d["macs"] = st.macs;
  d["inputs"] = st.inputs;
  d["output"] = st.output;
  d["nan_outputs"] = st.nan_outputs;
  d["inf_outputs"] = st.inf_outputs;
  return d;
}

template <class C>
void def_gemm(nb::module_& m, const char* name) {
  m.def(name,
        [](Array<const float> a, Array<const float> b, Array<C> c, int64_t m_, int64_t n, int64_t k,
           const std::string& model, const std::string& a_format, const std::string& b_format,
           const std::string& out_format, const std::string& input_policy, const std::string& out_rounding,
           const std::string& out_overflow, bool trans_a, bool trans_b, double alpha, double beta, std::optional<Array<const float>> a_scales,
           std::optional<Array<const float>> b_scales, int64_t block_k, int64_t a_block_mn, int64_t b_block_mn,
           float a_tensor_scale, float b_tensor_scale) {
          const GemmCall call{model, a_format, b_format, out_format, input_policy, out_rounding, out_overflow, trans_a, trans_b,
                              alpha, beta, a_scales, b_scales, block_k, a_block_mn, b_block_mn, a_tensor_scale,
                              b_tensor_scale};
          return run_gemm<C>(call, a, b, c, m_, n, k);
        },
        nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("c").noconvert(), nb::arg("m"), nb::arg("n"),
        nb::arg("k"), nb::arg("model"), nb::arg("a_format"), nb::arg("b_format"), nb::arg("out_format"),
        nb::arg("input_policy"), nb::arg("out_rounding"), nb::arg("out_overflow"), nb::arg("trans_a"), nb::arg("trans_b"), nb::arg("alpha"),
        nb::arg("beta"), nb::arg("a_scales").none(), nb::arg("b_scales").none(), nb::arg("block_k"),
        nb::arg("a_block_mn"), nb::arg("b_block_mn"), nb::arg("a_tensor_scale"), nb::arg("b_tensor_scale"));
}

// Every element of v a value of f, as `precsim dot` requires of --a and --b (the same words, the
// value spelt as C's %a; nearest: the value rounded to nearest-even into f).
void check_values(const char* name, std::span<const float> v, const Format& f) {
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i], q = round_to(f, x);
    if (!(q == x || (std::isnan(q) && std::isnan(x))))
      throw std::invalid_argument(std::string(name) + " element " + std::to_string(i) + " '" + hex_float(x) +
                                  "' is not a value of " + f.name + " (nearest: " + hex_float(q) + ")");
  }
}

// precsim.dot: `precsim dot`'s checks and result. out_format is the CLI's --output-format (the
// accumulator's format; fp16 on a Tensor Core preset its FP16-output variant).
std::pair<double, std::string> dot(Array<const float> a, Array<const float> b, double c, const std::string& model,
                                   const std::string& a_format, const std::string& b_format,
                                   std::optional<std::string> out_format) {
  if (a.size() != b.size())
    throw std::invalid_argument("a has " + std::to_string(a.size()) + " elements and b " + std::to_string(b.size()));
  const AccumModel am =
      out_format ? accum_model_with_output(model, format_by_name(*out_format), "out_format") : parse_accum_model(model);
  if (am.kind == AccumKind::kUnordered)
    throw std::invalid_argument("model unordered has no defined summation order; dot needs an ordered model");
  const Format af = format_by_name(a_format), bf = format_by_name(b_format);
  const std::span<const float> as(a.data(), a.size()), bs(b.data(), b.size());
  check_values("a", as, af);
  check_values("b", bs, bf);
  if (!(round_to(am.acc, c) == c || std::isnan(c)))
    throw std::invalid_argument("c '" + hex_float(c) + "' is not a value of the accumulator format " + am.acc.name +
                                " (nearest: " + hex_float(round_to(am.acc, c)) + ")");
  uint32_t status = 0;
  double r;
  {
    nb::gil_scoped_release release;
    r = accum_dot(am, as, bs, c, af, bf, &status);
  }
  return {r, status_to_string(status)};
}

MmaMatrix matrix(const std::optional<Array<const float>>& x) {
  if (!x) return {};
  if (x->ndim() != 2) throw std::invalid_argument("mma: operands and scales must be 2-D arrays");
  return {std::span<const float>(x->data(), x->size()), int64_t(x->shape(0)), int64_t(x->shape(1))};
}

std::optional<Format> optional_format(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  return format_by_name(*name);
}

// precsim.mma: D = A B + C by one instruction, D written into d (C's shape, float64: every D format
// fits); returns what the instruction resolved to.
nb::dict mma_call(Array<const float> a, Array<const float> b, Array<const float> c, Array<double> d,
                  const std::string& model, std::optional<std::string> a_format, std::optional<std::string> b_format,
                  std::optional<std::string> out_format, std::optional<Array<const float>> a_scales,
                  std::optional<Array<const float>> b_scales) {
  const MmaOperands x{matrix(a), matrix(b), matrix(c), matrix(a_scales), matrix(b_scales)};
  const MmaInstruction ins = resolve_mma(model, optional_format(a_format), optional_format(b_format),
                                         optional_format(out_format), x.c.rows, x.c.cols, x.a.cols);
  std::vector<double> r;
  {
    nb::gil_scoped_release release;
    r = mma(ins, x);
  }
  if (d.size() != r.size()) throw std::invalid_argument("mma: the output array does not have C's shape");
  std::copy(r.begin(), r.end(), d.data());
  nb::dict info;
  info["instruction"] = ins.name;
  info["m"] = ins.m, info["n"] = ins.n, info["k"] = ins.k;
  info["a_format"] = ins.a.name, info["b_format"] = ins.b.name;
  info["c_format"] = ins.c.name, info["d_format"] = ins.d.name;
  info["model"] = py_from_json(to_json(ins.model));
  return info;
}

}  // namespace

void bind_gemm(nb::module_& m) {
  m.def("mma", &mma_call, nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("c").noconvert(),
        nb::arg("d").noconvert(), nb::arg("model"), nb::arg("a_format").none(), nb::arg("b_format").none(),
        nb::arg("out_format").none(), nb::arg("a_scales").none(), nb::arg("b_scales").none());
  def_gemm<float>(m, "gemm_f32");
  def_gemm<double>(m, "gemm_f64");
  m.def("dot", &dot, nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("c"), nb::arg("model"),
        nb::arg("a_format"), nb::arg("b_format"), nb::arg("out_format").none());
  m.def(
      "accum_models", [] { return py_from_json(accum_models_json()); },
      "Every accumulation model preset and matrix instruction, as dicts.");
  m.def("accum_model", [](const std::string& spec) { return py_from_json(to_json(parse_accum_model(spec))); },
        nb::arg("spec"), "A model spec resolved, as a dict.");
}

}  // namespace precsim::py

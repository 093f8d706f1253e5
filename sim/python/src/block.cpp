// Block-scaled formats on 2-D float32 arrays (rows x cols, blocks along `axis`): fake quantization,
// the packed form (codes, block scales, tensor scale) and back.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <stdexcept>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "precsim/sim/analysis/tensor_report.h"
#include "py_common.h"
#include "py_json.h"
#include "signals.h"

namespace precsim::py {
namespace {

// The scheme as parsed, with the element rounding (overflow stays the scheme's: elements saturate)
// and, when given, another block axis.
BlockScaling scheme_with(const std::string& scheme, std::optional<int> axis, const QuantOptions& o) {
  BlockScaling s = parse_block_scaling(scheme);
  if (axis) {
    if (*axis != 0 && *axis != 1)
      throw std::invalid_argument("axis " + std::to_string(*axis) + " is out of range; allowed: 0, 1");
    s.axis = *axis;
  }
  const Overflow keep = s.element_options.overflow;
  s.element_options = o;
  s.element_options.overflow = s.is_plain() ? o.overflow : keep;
  return s;
}

void check_shape(const Array<const float>& in, size_t rows, size_t cols) {
  if (in.size() != rows * cols)
    throw std::invalid_argument("the array has " + std::to_string(in.size()) + " elements, not rows " +
                                std::to_string(rows) + " x cols " + std::to_string(cols));
}

nb::dict stats_dict(const BlockStats& s) {
  nb::dict d;
  d["elements"] = s.elements;
  d["blocks"] = s.blocks;
  d["clipped_blocks"] = s.clipped_blocks;
  d["nonfinite_blocks"] = s.nonfinite_blocks;
  d["saturated"] = s.saturated;
  d["flushed"] = s.flushed;
  d["nonfinite_inputs"] = s.nonfinite_inputs;
  d["scale_log2_histogram"] = s.scale_log2_histogram;
  return d;
}

}  // namespace

namespace {

void bind_packed(nb::module_& m) {
  nb::class_<BlockPacked>(m, "BlockPacked", "A block-scaled array in its packed form (formats/block_scaling.h).")
      .def_ro("rows", &BlockPacked::rows)
      .def_ro("cols", &BlockPacked::cols)
      .def_ro("axis", &BlockPacked::axis)
      .def_ro("code_row_bytes", &BlockPacked::code_row_bytes)
      .def_ro("scale_rows", &BlockPacked::scale_rows)
      .def_ro("scale_cols", &BlockPacked::scale_cols)
      .def_ro("tensor_scale", &BlockPacked::tensor_scale)
      .def_prop_ro("codes", [](nb::handle self) {
        BlockPacked& p = nb::cast<BlockPacked&>(self);
        // The array's rows, or for axis 0 its columns (the transpose is stored), even where a row
        // holds no byte: an empty array's (0, 64) codes along axis 0 are (64, 0), as the CLI's.
        const size_t stored_rows = p.axis == 0 ? p.cols : p.rows;
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>>(p.codes.data(), {stored_rows, p.code_row_bytes}, self);
      }, nb::rv_policy::reference_internal)
      .def_prop_ro("scale_bytes", [](nb::handle self) {
        BlockPacked& p = nb::cast<BlockPacked&>(self);
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(p.scales.data(), {p.scales.size()}, self);
      }, nb::rv_policy::reference_internal);
}

// A scheme's description, the error of an approximation, and analyze's statistics of a tensor.
void bind_scheme_stats(nb::module_& m) {
  m.def("block_scheme", [](const std::string& scheme) {
    const BlockScaling s = parse_block_scaling(scheme);
    nb::dict d;
    d["name"] = s.name;
    d["element"] = s.element;
    d["rule"] = std::string(to_string(s.rule));
    d["scale_format"] = std::string(to_string(s.scale_format));
    d["block_along"] = s.block_along;
    d["block_across"] = s.block_across;
    d["axis"] = s.axis;
    d["element_exp"] = s.element_exp();
    return d;
  }, nb::arg("scheme"));
  m.def("block_scaling_presets", &block_scaling_presets);
  m.def("error_stats", [](Array<const float> x, Array<const float> q) {
    if (x.size() != q.size())
      throw std::invalid_argument("x has " + std::to_string(x.size()) + " elements and q " + std::to_string(q.size()));
    ErrorStats e;
    {
      nb::gil_scoped_release release;
      e = error_stats(std::span<const float>(x.data(), x.size()), std::span<const float>(q.data(), q.size()));
    }
    nb::dict d;
    d["count"] = e.count;
    d["nonfinite_inputs"] = e.nonfinite_inputs;
    d["nonzero_inputs"] = e.nonzero_inputs;
    d["flushed"] = e.flushed;
    d["signal_power"] = e.signal_power;
    d["noise_power"] = e.noise_power;
    d["mse"] = e.mse;
    d["qsnr_db"] = e.qsnr_db;
    d["max_rel_error"] = e.max_rel_error;
    return d;
  }, nb::arg("x").noconvert(), nb::arg("q").noconvert(),
        "Error of an approximation q of x (analyze's QSNR, MSE, max relative error), summed in a fixed order.");

  // analyze's statistics of one tensor, as the CLI report's entry for it.
  m.def("analyze", [](Array<const float> x, const std::vector<size_t>& shape, const std::vector<std::string>& names,
                      const QuantOptions& o) {
    const std::vector<BlockScaling> schemes = resolve_schemes(names, o);
    if (x.size() == 0) throw std::invalid_argument("x: the array is empty");
    // analyze_tensor's loop, one scheme at a time with Ctrl-C polled between them.
    const std::span<const float> values(x.data(), x.size());
    SignalPoll signals;
    TensorAnalysis t;
    {
      nb::gil_scoped_release release;
      t = analyze_tensor(values, shape, {}, 0);
      std::vector<float> q(values.size());
      for (const auto& s : schemes) {
        t.schemes.push_back(analyze_scheme(values, t.rows, t.cols, s, 0, q));
        if (signals.poll()) break;
      }
    }
    if (signals.raised()) signals.rethrow();
    return py_from_json(tensor_analysis_json(t));
  }, nb::arg("x").noconvert(), nb::arg("shape"), nb::arg("schemes"), nb::arg("options"));
}

// Fake quantization, the packed form and back, and the scales of a packed array.
void bind_block_kernels(nb::module_& m) {
  m.def("block_fake_quantize", [](const std::string& scheme, Array<const float> in, Array<float> out, size_t rows,
                                  size_t cols, std::optional<int> axis, const QuantOptions& o, double tensor_amax) {
    const BlockScaling s = scheme_with(scheme, axis, o);
    check_shape(in, rows, cols);
    BlockStats st;
    {
      nb::gil_scoped_release release;
      block_fake_quantize(s, std::span<const float>(in.data(), in.size()), std::span<float>(out.data(), out.size()),
                          rows, cols, &st, 0, tensor_amax);
    }
    return stats_dict(st);
  }, nb::arg("scheme"), nb::arg("x").noconvert(), nb::arg("out").noconvert(), nb::arg("rows"), nb::arg("cols"),
        nb::arg("axis").none(), nb::arg("options"), nb::arg("tensor_amax") = -1.0);

  m.def("block_encode", [](const std::string& scheme, Array<const float> in, size_t rows, size_t cols,
                           std::optional<int> axis, const QuantOptions& o, double tensor_amax) {
    const BlockScaling s = scheme_with(scheme, axis, o);
    check_shape(in, rows, cols);
    BlockStats st;
    BlockPacked p;
    {
      nb::gil_scoped_release release;
      p = block_quantize(s, std::span<const float>(in.data(), in.size()), rows, cols, &st, 0, tensor_amax);
    }
    return std::make_tuple(std::move(p), stats_dict(st));
  }, nb::arg("scheme"), nb::arg("x").noconvert(), nb::arg("rows"), nb::arg("cols"), nb::arg("axis").none(),
        nb::arg("options"), nb::arg("tensor_amax") = -1.0);

  m.def("block_decode", [](const std::string& scheme, const BlockPacked& p, Array<float> out) {
    BlockScaling s = parse_block_scaling(scheme);
    s.axis = p.axis;
    if (out.size() != p.rows * p.cols)
      throw std::invalid_argument("out has " + std::to_string(out.size()) + " elements; the packed array " +
                                  std::to_string(p.rows * p.cols));
    nb::gil_scoped_release release;
    block_dequantize(s, p, std::span<float>(out.data(), out.size()));
  }, nb::arg("scheme"), nb::arg("packed"), nb::arg("out").noconvert());

  m.def("block_scale_values", [](const std::string& scheme, const BlockPacked& p, Array<double> out) {
    BlockScaling s = parse_block_scaling(scheme);
    s.axis = p.axis;
    if (out.size() != p.scale_rows * p.scale_cols)
      throw std::invalid_argument("out has " + std::to_string(out.size()) + " elements; the scales " +
                                  std::to_string(p.scale_rows * p.scale_cols));
    nb::gil_scoped_release release;
    for (size_t i = 0; i < out.size(); ++i) out.data()[i] = block_scale_value(s, p, i);
  }, nb::arg("scheme"), nb::arg("packed"), nb::arg("out").noconvert());
}

}  // namespace

void bind_block(nb::module_& m) {
  bind_packed(m);
  bind_scheme_stats(m);
  bind_block_kernels(m);
}

}  // namespace precsim::py

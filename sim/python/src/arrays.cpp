// Element-wise rounding of whole arrays: quantize (values), encode (codes), decode, FP4 packing.
// The GIL is released while the kernels run.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <span>
#include <stdexcept>

#include "precsim/formats/quantize.h"
#include "py_common.h"
#include "signals.h"

namespace precsim::py {
namespace {

// Elements per call between two polls for Ctrl-C: milliseconds of the slowest rounding.
constexpr size_t kChunk = size_t{1} << 22;

template <class T>
QuantStats quantize_into(const Format& f, Array<const T> in, Array<T> out, const QuantOptions& o) {
  if (in.size() != out.size())
    throw std::invalid_argument("out has " + std::to_string(out.size()) + " elements; the input has " +
                                std::to_string(in.size()));
  QuantStats st;
  // Element i's stochastic rounding uses index i in any chunk (index_base), so chunks change no bit.
  run_in_chunks(in.size(), kChunk, [&](size_t b, size_t e) {
    QuantStats part;
    quantize(f, std::span<const T>(in.data() + b, e - b), std::span<T>(out.data() + b, e - b), o, &part, b);
    st += part;
  });
  return st;
}

template <class T>
QuantStats encode_into(const Format& f, Array<const T> in, AnyArray codes, const QuantOptions& o) {
  const size_t bytes = element_count(codes) * codes.itemsize();
  if (bytes != in.size() * code_bytes(f))
    throw std::invalid_argument("codes hold " + std::to_string(bytes) + " bytes; " + f.name + " needs " +
                                std::to_string(in.size() * code_bytes(f)));
  QuantStats st;
  const size_t w = code_bytes(f);
  run_in_chunks(in.size(), kChunk, [&](size_t b, size_t e) {
    QuantStats part;
    encode_array(f, std::span<const T>(in.data() + b, e - b), static_cast<uint8_t*>(codes.data()) + b * w, o, &part, b);
    st += part;
  });
  return st;
}

template <class T>
void decode_into(const Format& f, AnyArray codes, Array<T> out) {
  const size_t bytes = element_count(codes) * codes.itemsize();
  if (bytes != out.size() * code_bytes(f))
    throw std::invalid_argument("codes hold " + std::to_string(bytes) + " bytes; " + std::to_string(out.size()) +
                                " values of " + f.name + " need " + std::to_string(out.size() * code_bytes(f)));
  nb::gil_scoped_release release;
  decode_array(f, codes.data(), std::span<T>(out.data(), out.size()));
}

template <class T>
void def_typed(nb::module_& m, const char* suffix) {
  const std::string s = suffix;
  m.def(("quantize_" + s).c_str(), &quantize_into<T>, nb::arg("fmt"), nb::arg("x").noconvert(),
        nb::arg("out").noconvert(), nb::arg("options"));
  m.def(("encode_" + s).c_str(), &encode_into<T>, nb::arg("fmt"), nb::arg("x").noconvert(),
        nb::arg("codes").noconvert(), nb::arg("options"));
  m.def(("decode_" + s).c_str(), &decode_into<T>, nb::arg("fmt"), nb::arg("codes").noconvert(),
        nb::arg("out").noconvert());
}

}  // namespace

void bind_arrays(nb::module_& m) {
  nb::class_<QuantOptions>(m, "QuantOptions", "How values are rounded (quantize's keyword arguments).")
      .def("__init__",
           [](QuantOptions* self, const std::string& rounding, const std::string& overflow, bool flush, int sr_bits,
              uint64_t seed, const KeyTuple& key) {
             new (self) QuantOptions(make_options(rounding, overflow, flush, sr_bits, seed, key));
           },
           nb::arg("rounding") = "nearest-even", nb::arg("overflow") = "ieee", nb::arg("flush_subnormals") = false,
           nb::arg("sr_bits") = 32, nb::arg("seed") = 0, nb::arg("key") = KeyTuple{0, 0, 0})
      .def_prop_ro("rounding", [](const QuantOptions& o) { return std::string(to_string(o.rounding)); })
      .def_prop_ro("overflow", [](const QuantOptions& o) { return std::string(to_string(o.overflow)); })
      .def_ro("flush_subnormals", &QuantOptions::flush_subnormals)
      .def_ro("sr_bits", &QuantOptions::sr_bits)
      .def_prop_ro("seed", [](const QuantOptions& o) { return o.sr_key.seed; });

  nb::class_<QuantStats>(m, "QuantStats", "Counts of what the roundings of an array did.")
      .def(nb::init<>())
      .def_ro("count", &QuantStats::count)
      .def_ro("inexact", &QuantStats::inexact)
      .def_ro("underflow_to_zero", &QuantStats::underflow_to_zero)
      .def_ro("subnormal", &QuantStats::subnormal)
      .def_ro("overflow", &QuantStats::overflow)
      .def_ro("saturated", &QuantStats::saturated)
      .def_ro("nan", &QuantStats::nan)
      .def("__eq__", [](const QuantStats& a, nb::handle b) -> nb::object {
        // Any object may be compared: one that is not a QuantStats is not equal (NotImplemented).
        if (!nb::isinstance<QuantStats>(b)) return nb::borrow(Py_NotImplemented);
        return nb::bool_(a == nb::cast<const QuantStats&>(b));
      }, nb::sig("def __eq__(self, other: object, /) -> bool"))
      .def("__repr__", [](const QuantStats& s) {
        return "QuantStats(count=" + std::to_string(s.count) + ", inexact=" + std::to_string(s.inexact) +
               ", underflow_to_zero=" + std::to_string(s.underflow_to_zero) + ", subnormal=" +
               std::to_string(s.subnormal) + ", overflow=" + std::to_string(s.overflow) + ", saturated=" +
               std::to_string(s.saturated) + ", nan=" + std::to_string(s.nan) + ")";
      });

  def_typed<float>(m, "f32");
  def_typed<double>(m, "f64");
  // The library checks the sizes (std::invalid_argument: ValueError).
  m.def("pack_nibbles", [](Array<const uint8_t> codes, Array<uint8_t> packed) {
    nb::gil_scoped_release release;
    pack_nibbles(std::span<const uint8_t>(codes.data(), codes.size()), std::span<uint8_t>(packed.data(), packed.size()));
  }, nb::arg("codes").noconvert(), nb::arg("packed").noconvert());
  m.def("unpack_nibbles", [](Array<const uint8_t> packed, Array<uint8_t> codes) {
    nb::gil_scoped_release release;
    unpack_nibbles(std::span<const uint8_t>(packed.data(), packed.size()), std::span<uint8_t>(codes.data(), codes.size()));
  }, nb::arg("packed").noconvert(), nb::arg("codes").noconvert());
}

}  // namespace precsim::py

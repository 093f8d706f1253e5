// precsim.Format and precsim.formats(): the format table as Python objects.
#include <stdexcept>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "precsim/formats/quantize.h"
#include "py_common.h"

namespace precsim::py {
namespace {

std::vector<std::string> aliases_of(const Format& f) {
  for (const auto& p : format_presets())
    if (p.format == f) return p.aliases;
  return {};
}

}  // namespace

void bind_formats(nb::module_& m) {
  nb::class_<Format>(m, "Format", "A number format: a preset name or alias, or a custom eXmY[:...] spec.")
      .def("__init__", [](Format* self, const std::string& spec) { new (self) Format(format_by_name(spec)); },
           nb::arg("spec"))
      // A dtype (np.float16, ml_dtypes.bfloat16, ...): mapped by the Python package's one table.
      .def("__init__",
           [](Format* self, nb::handle dtype) {
             const nb::object name = nb::module_::import_("precsim._arrays").attr("format_name")(dtype, "spec");
             new (self) Format(format_by_name(nb::cast<std::string>(name)));
           },
           nb::arg("spec"))
      .def_ro("name", &Format::name)
      .def_prop_ro("bits", &Format::bits)
      .def_ro("exponent_bits", &Format::exp_bits)
      .def_ro("mantissa_bits", &Format::man_bits)
      .def_ro("bias", &Format::bias)
      .def_prop_ro("emin", &Format::emin)
      .def_prop_ro("emax", &Format::emax)
      .def_prop_ro("max", &Format::max_finite)
      .def_prop_ro("min_normal", &Format::min_normal)
      .def_prop_ro("min_subnormal", &Format::min_subnormal)
      .def_prop_ro("epsilon", &Format::epsilon)
      .def_prop_ro("finite_count", &Format::finite_count)
      .def_prop_ro("binades", &Format::range_binades)
      .def_prop_ro("nonfinite", [](const Format& f) { return std::string(to_string(f.nonfinite)); })
      .def_ro("subnormals", &Format::subnormals)
      .def_ro("signed", &Format::is_signed)
      .def_prop_ro("kind", [](const Format& f) { return f.kind == FormatKind::kInt ? "int" : "float"; })
      .def_prop_ro("has_inf", &Format::has_inf)
      .def_prop_ro("has_nan", &Format::has_nan)
      .def_prop_ro("code_bytes", [](const Format& f) { return code_bytes(f); })
      .def_prop_ro("aliases", &aliases_of)
      // The preset with this format's codes and values (Binary8p4sf: float8_e4m3fnuz), else None.
      .def_prop_ro("same_encoding_preset",
                   [](const Format& f) -> nb::object {
                     const FormatPreset* p = preset_with_encoding(f);
                     return p ? nb::cast(p->format.name) : nb::none();
                   })
      // numpy.finfo's names for the same numbers, so that code written for finfo reads a Format.
      .def_prop_ro("eps", &Format::epsilon)
      .def_prop_ro("smallest_normal", &Format::min_normal)
      .def_prop_ro("smallest_subnormal", &Format::min_subnormal)
      .def_ro("nmant", &Format::man_bits)
      .def_ro("nexp", &Format::exp_bits)
      .def("__eq__", [](const Format& a, nb::handle b) -> nb::object {
        // Any object may be compared. A str is read as a format name, as where a Format is taken
        // (implicitly convertible), and one that names no format is not equal; other objects
        // leave it to Python (NotImplemented).
        if (nb::isinstance<Format>(b)) return nb::bool_(a == nb::cast<const Format&>(b));
        if (!nb::isinstance<nb::str>(b)) return nb::borrow(Py_NotImplemented);
        try {
          return nb::bool_(a == format_by_name(nb::cast<std::string>(b)));
        } catch (const std::invalid_argument&) {
          return nb::bool_(false);
        }
      }, nb::sig("def __eq__(self, other: object, /) -> bool"))
      .def("__hash__", [](const Format& f) { return std::hash<std::string>{}(f.name); })
      .def("__repr__", [](const Format& f) { return "Format('" + f.name + "')"; });
  nb::implicitly_convertible<std::string, Format>();
  m.def("formats", [] {
    std::vector<Format> out;
    for (const auto& p : format_presets()) out.push_back(p.format);
    return out;
  }, "The preset formats in table order.");
}

}  // namespace precsim::py

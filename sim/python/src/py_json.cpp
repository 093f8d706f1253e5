// Python objects <-> nlohmann::json (py_json.h). The rules are those of the path this replaces,
// json.dumps in Python and nlohmann::json::parse in C++, so that a config means what it meant.
#include "py_json.h"

#include <nanobind/stl/string.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace precsim::py {
namespace {

using nlohmann::json;

// Deeper than any config or report; a self-containing list would otherwise recurse until the stack ends.
constexpr int kMaxDepth = 200;

// Where a value sits under the root, a chain up the C++ stack: the path is only spelled out for a message.
struct Where {
  const Where* up = nullptr;
  std::string_view key;  // an object member
  long index = -1;       // an array element (key unused)
};

std::string path_of(const std::string& what, const Where* w) {
  std::vector<const Where*> chain;
  for (; w; w = w->up) chain.push_back(w);
  std::string s = what;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    s += (*it)->index >= 0 ? "[" + std::to_string((*it)->index) + "]" : "." + std::string((*it)->key);
  return s;
}

class ToJson {
 public:
  explicit ToJson(const std::string& what) : what_(what) {}

  json value(nb::handle h, const Where* w, int depth) const {
    PyObject* o = h.ptr();
    if (o == Py_None) return nullptr;
    if (PyBool_Check(o)) return o == Py_True;
    if (PyLong_Check(o)) return integer(h, w);
    if (PyFloat_Check(o)) return number(PyFloat_AS_DOUBLE(o), w);
    if (PyUnicode_Check(o)) return utf8(h);
    if (depth >= kMaxDepth)
      throw nb::value_error((path_of(what_, w) + ": nested more than " + std::to_string(kMaxDepth) +
                             " levels deep (does it contain itself?)").c_str());
    if (PyDict_Check(o)) return object(h, w, depth);
    if (PyList_Check(o) || PyTuple_Check(o)) return array(h, w, depth);
    // NumPy's integers are not Python ints, but say they are integers (__index__).
    if (PyIndex_Check(o)) return integer(nb::steal(PyNumber_Index(o)), w);
    throw nb::type_error((path_of(what_, w) + ": a " + Py_TYPE(o)->tp_name +
                          " is not a JSON value; allowed: dict, list, tuple, str, int, float, bool, None").c_str());
  }

 private:
  // As the parser reads json.dumps's digits: unsigned when not negative, a double beyond 64 bits.
  json integer(nb::handle h, const Where* w) const {
    if (!h.is_valid()) throw nb::python_error();
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (!overflow) {
      if (v == -1 && PyErr_Occurred()) throw nb::python_error();
      return v < 0 ? json(int64_t(v)) : json(uint64_t(v));
    }
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(h.ptr());
      if (!PyErr_Occurred()) return uint64_t(u);
      PyErr_Clear();
    }
    const double d = PyLong_AsDouble(h.ptr());
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      throw nb::value_error((path_of(what_, w) + ": the integer is too large for a JSON number").c_str());
    }
    return d;
  }

  json number(double d, const Where* w) const {
    if (std::isfinite(d)) return d;
    const char* spelled = std::isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity";
    throw nb::value_error((path_of(what_, w) + ": " + spelled + " is not a JSON number (JSON numbers are finite)").c_str());
  }

  static std::string utf8(nb::handle h) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (!s) throw nb::python_error();  // a lone surrogate: UnicodeEncodeError
    return std::string(s, size_t(n));
  }

  json object(nb::handle h, const Where* w, int depth) const {
    json out = json::object();
    PyObject *k = nullptr, *v = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(h.ptr(), &pos, &k, &v)) {
      if (!PyUnicode_Check(k))
        throw nb::type_error((path_of(what_, w) + ": keys must be strings, got the " + Py_TYPE(k)->tp_name + " " +
                              nb::cast<std::string>(nb::repr(k))).c_str());
      const nb::object key = nb::borrow(k), item = nb::borrow(v);  // held: __index__ may run Python code
      const std::string name = utf8(key);
      const Where here{w, name};
      out[name] = value(item, &here, depth + 1);
    }
    return out;
  }

  json array(nb::handle h, const Where* w, int depth) const {
    json out = json::array();
    const nb::object seq = nb::borrow(h);
    const Py_ssize_t n = PySequence_Size(seq.ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      const nb::object item = nb::steal(PySequence_GetItem(seq.ptr(), i));
      if (!item.is_valid()) throw nb::python_error();
      const Where here{w, {}, long(i)};
      out.push_back(value(item, &here, depth + 1));
    }
    return out;
  }

  const std::string& what_;
};

nb::object py_int(const json& j) {
  PyObject* o = j.is_number_unsigned() ? PyLong_FromUnsignedLongLong(j.get<uint64_t>())
                                       : PyLong_FromLongLong(j.get<int64_t>());
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

// The name of a value's JSON type as the parser would store it (the tests' view of json_from_py).
const char* kind_of(const json& j) {
  if (j.is_number_unsigned()) return "unsigned";
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "float";
  return j.type_name();
}

json parse_text(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(what + ": not valid JSON: " + e.what());
  }
}

}  // namespace

json json_from_py(nb::handle value, const std::string& what) { return ToJson(what).value(value, nullptr, 0); }

namespace {

nb::object to_py(const json& j) {
  switch (j.type()) {
    case json::value_t::boolean: return nb::bool_(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return py_int(j);
    case json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) ? nb::object(nb::float_(d)) : nb::none();
    }
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      return nb::str(s.data(), s.size());
    }
    case json::value_t::array: {
      nb::list out;
      for (const json& e : j) out.append(to_py(e));
      return out;
    }
    case json::value_t::object: {
      nb::dict out;
      for (const auto& [k, v] : j.items()) out[nb::str(k.data(), k.size())] = to_py(v);
      return out;
    }
    default: return nb::none();  // null, discarded; binary values are not in any document
  }
}

}  // namespace

nb::any py_from_json(const json& j) { return nb::steal<nb::any>(to_py(j).release()); }

json parse_json_file(const std::string& path, const std::string& what) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // OSError picks the subclass from errno: FileNotFoundError, as Python's open() raised before.
    errno = errno ? errno : ENOENT;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
    throw nb::python_error();
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_text(text.str(), what);
}

void bind_json(nb::module_& m) {
  // Test hooks: what json_from_py makes of a value, seen from both sides.
  m.def("_json_echo", [](nb::handle v) { return py_from_json(json_from_py(v, "value")); }, nb::arg("value").none());
  m.def("_json_kind", [](nb::handle v) { return std::string(kind_of(json_from_py(v, "value"))); }, nb::arg("value").none());
}

}  // namespace precsim::py

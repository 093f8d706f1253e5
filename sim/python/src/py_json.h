// The one place where Python objects and nlohmann::json meet: configs, recipes, optimizer settings,
// report documents and check rules cross as Python objects (dict, list, str, numbers) and become JSON
// values here, so that no binding parses JSON text from Python and every message names the key.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include <nlohmann/json.hpp>

namespace precsim::py {

namespace nb = nanobind;

// A Python value as the C++ JSON reader would have parsed json.dumps(value): dict (str keys) ->
// object, list/tuple -> array, str, bool (before int: bool is an int in Python), None -> null; an
// int that is not negative -> number_unsigned, a negative one -> number_integer, one beyond 64 bits
// -> number_float (the parser's fallback); float -> number_float. NaN and Infinity, which JSON has
// no spelling for, raise ValueError; other types, non-str keys and cycles (too deep) raise
// TypeError / ValueError. Messages begin with `what` and the path of the value ("config.recipes[1]").
nlohmann::json json_from_py(nb::handle value, const std::string& what);

// A JSON value as json.loads(j.dump()) gives it: NaN and Infinity as None (dump writes them null).
// Typed typing.Any in the stub: its shape is the document's, which the Python wrappers annotate.
nb::any py_from_json(const nlohmann::json& j);

// A JSON file (a config or check rules) read and parsed: a missing file raises FileNotFoundError
// (OSError), as Python's open() did; invalid JSON a ValueError "<what>: not valid JSON: ...".
nlohmann::json parse_json_file(const std::string& path, const std::string& what);

void bind_json(nb::module_& m);

}  // namespace precsim::py

// The typed recipe (train/recipe.h) as Python holds it: precsim.Recipe (precsim/_recipe.py) wraps
// one of these, and every binding that computes with a recipe takes it, so a recipe is resolved and
// validated once, by the same code as a config's recipe, and never crosses as text.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/recipe_json.h"
#include "precsim/sim/train/recipe_parts.h"
#include "py_common.h"
#include "py_json.h"

namespace precsim::py {
namespace {

// A config's recipe object {"name", "preset", keys...}: the name is the preset when none is given
// and, with neither, "custom" (the name the dict recipes of precsim.torch had); errors of the JSON
// library (a wrong type deep inside) say that they are the recipe's.
Recipe recipe_named(nlohmann::json j) {
  std::string name = "custom";
  if (j.is_object() && j.contains("name")) {
    if (!j["name"].is_string()) throw std::invalid_argument("recipe key 'name': expected a string, got " + j["name"].dump());
    name = j["name"].get<std::string>();
    j.erase("name");
  } else if (j.is_object() && j.contains("preset") && j["preset"].is_string()) {
    name = j["preset"].get<std::string>();
  }
  try {
    Recipe r = recipe_from_json(j, name);
    r.name = name;
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("recipe: ") + e.what());
  }
}

// The recipe with a merge patch of top-level keys applied (name included) and validated again.
Recipe recipe_replaced(const Recipe& r, nb::handle changes) {
  nlohmann::json j = recipe_to_json(r);
  j["name"] = r.name;
  j.merge_patch(json_from_py(changes, "changes"));
  return recipe_named(std::move(j));
}

nb::any recipe_dict(const Recipe& r) {
  nlohmann::json j = recipe_to_json(r);
  j["name"] = r.name;
  return py_from_json(j);
}

// The recipe each linear layer of an MLP with `layers` layers computes with, as precsim train
// resolves it (keep_bf16_layers, layers overrides); empty when the recipe names no part.
std::vector<Recipe> layer_recipes(const Recipe& r, int layers) {
  const PartRecipes parts(r, false, layers);
  std::vector<Recipe> out;
  for (int s = 0; s < parts.slots(); ++s) out.push_back(parts.at(s));
  return out;
}

}  // namespace

void bind_recipe(nb::module_& m) {
  nb::class_<Recipe>(m, "TypedRecipe", "A resolved recipe (train/recipe.h); precsim.Recipe wraps one.")
      .def_static("from_preset", [](const std::string& n) { return recipe_preset(n); }, nb::arg("name"), "A preset by name (unknown names list the known ones).")
      .def_static("from_dict", [](nb::handle d) { return recipe_named(json_from_py(d, "recipe")); }, nb::arg("d"),
                  "A config's recipe object {name, preset, keys...}, validated.")
      .def("replace", &recipe_replaced, nb::arg("changes"), "This recipe with top-level keys merged in, validated.")
      .def("to_dict", &recipe_dict, "Every key, the name included.")
      .def("layer_recipes", &layer_recipes, nb::arg("layers"),
           "Per-layer recipes of an MLP with `layers` linear layers; [] when every layer takes the recipe itself.")
      .def_prop_ro("name", [](const Recipe& r) { return r.name; })
      .def_prop_ro("preset", [](const Recipe& r) { return r.preset; });
  m.def("recipe_presets", &recipe_preset_names);
}

}  // namespace precsim::py

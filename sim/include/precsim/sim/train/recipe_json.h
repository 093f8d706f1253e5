// The recipe's JSON edge: a config's recipe object read into a resolved Recipe, and a Recipe written
// back as the object a report holds. Every other file of the recipe works on typed values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "precsim/sim/train/recipe.h"

namespace precsim {

// A preset (key "preset", default the name) with fields overridden by the other keys of `j`;
// unknown keys, wrong types and unknown formats throw std::invalid_argument naming the key.
Recipe recipe_from_json(const nlohmann::json& j, std::string_view default_name);
nlohmann::json recipe_to_json(const Recipe& r);
// start with every key of `complete` (an object with all of recipe_keys_json's keys) read into it,
// each key checked on its own. The checks across keys (apply_block_recipe, check_gradient_roundings,
// check_instruction_gemms) are the caller's: recipe_from_json makes them, and so do the recipe
// algebra's mixes (recipe_parts.h).
Recipe recipe_fields_from_json(const nlohmann::json& complete, const Recipe& start);
// recipe_to_json without the per-part keys ("layers", "keep_bf16_layers").
nlohmann::json recipe_keys_json(const Recipe& r);
// The recipe keys of the groups in `bits`, with donor's values: a JSON patch of recipe keys.
// for_part: only the keys a model part may set (without loss_scaling and autocast, which exist
// once per model and otherwise travel with the activation gradients and the activations).
nlohmann::json role_patch(const Recipe& donor, uint32_t bits, bool for_part = false);
// Throws std::invalid_argument when a part's keys name a key that exists once per model (the
// optimizer, loss scaling, split, ...), naming it, `where` and the keys a part may set.
void check_part_keys(const nlohmann::json& patch, const std::string& where);
// A part's recipe object ({preset?, per-layer keys}) read as a typed part, its keys checked
// against base (names, types, formats; the keys' values do not depend on base). Throws
// std::invalid_argument naming "layers.NAME" and the key. check_part_keys first.
RecipePart part_from_json(const std::string& name, const nlohmann::json& patch, const Recipe& base);
// The part's object as the config wrote it: its preset and exactly the keys it sets.
nlohmann::json part_to_json(const RecipePart& part);

// Documentation of every recipe key, for the docs and --config-help.
std::string recipe_keys_doc();

}  // namespace precsim

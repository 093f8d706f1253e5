// The recipe keys a named part of a model may set (recipe_parts.h), as a table of leaves: each leaf
// one bit of RecipePart::keys, its JSON path (the recipe_json edge reads and writes parts with it),
// the role groups it belongs to (attribution and search build parts from groups) and how it is
// copied from one Recipe to another. A part is applied on typed values: no JSON text is patched.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/sim/train/recipe.h"

namespace precsim {

struct PartKey {
  std::vector<std::string> path;  // JSON path in a recipe object ("gemm", "forward", "a", "format")
  std::string dotted;             // the same joined with '.', for messages and prefix lookups
  uint32_t roles = 0;             // PartBits groups (recipe_parts.h) that carry it; 0: none (a switch)
  std::function<void(Recipe&, const Recipe&)> copy;        // to.leaf = from.leaf
  std::function<bool(const Recipe&, const Recipe&)> same;  // a.leaf == b.leaf (as written in JSON)
};

// Every leaf, in a fixed order: bit i of RecipePart::keys is part_key_table()[i].
std::span<const PartKey> part_key_table();
// The leaves at or under the given dotted paths ("gemm.forward.a", "weights.format", "rht"); throws
// std::invalid_argument for a path that names no leaf.
uint64_t part_keys_at(std::initializer_list<std::string_view> dotted);
// The leaves of the role groups in `bits` a part may set (as role_patch with for_part names).
uint64_t part_keys_of_roles(uint32_t bits);
// to's leaves in `keys` set from `from`'s.
void copy_part_keys(Recipe& to, const Recipe& from, uint64_t keys);
// Whether a and b agree on every leaf in `keys`.
bool same_part_keys(const Recipe& a, const Recipe& b, uint64_t keys);

}  // namespace precsim

#include "precsim/sim/train/part_keys.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "precsim/sim/train/recipe_parts.h"

namespace precsim {
namespace {

using Path = std::vector<std::string>;

void add(std::vector<PartKey>& t, Path p, uint32_t roles, std::function<void(Recipe&, const Recipe&)> copy,
         std::function<bool(const Recipe&, const Recipe&)> same) {
  std::string dotted;
  for (const auto& k : p) dotted += (dotted.empty() ? "" : ".") + k;
  t.push_back({std::move(p), std::move(dotted), roles, std::move(copy), std::move(same)});
}

// A plain value leaf: copied and compared as a whole. `get` is generic over const so that one
// accessor serves both sides.
template <class Get>
void add_value(std::vector<PartKey>& t, Path p, uint32_t roles, Get get) {
  add(
      t, std::move(p), roles, [get](Recipe& to, const Recipe& from) { get(to) = get(from); },
      [get](const Recipe& a, const Recipe& b) { return get(a) == get(b); });
}

// {format, rounding} of a TensorFormat: the format leaf carries the name as written and the
// resolved Format together.
template <class Get>
void add_tensor_format(std::vector<PartKey>& t, const Path& p, uint32_t roles, Get get) {
  Path f = p, r = p;
  f.push_back("format");
  r.push_back("rounding");
  add(
      t, f, roles,
      [get](Recipe& to, const Recipe& from) {
        get(to).name = get(from).name;
        get(to).format = get(from).format;
      },
      [get](const Recipe& a, const Recipe& b) { return get(a).name == get(b).name; });
  add_value(
      t, r, roles, [get](auto& x) -> auto& { return get(x).rounding; });
}

template <class Get>
void add_operand(std::vector<PartKey>& t, const Path& p, uint32_t roles, Get get) {
  add_tensor_format(
      t, p, roles, [get](auto& x) -> auto& { return get(x).fmt; });
  Path s = p, b = p;
  s.push_back("scaling");
  b.push_back("block");
  add_value(
      t, s, roles, [get](auto& x) -> auto& { return get(x).scaling; });
  add_value(
      t, b, roles, [get](auto& x) -> auto& { return get(x).block; });
}

void add_gemm(std::vector<PartKey>& t, const char* pass, GemmSpec Recipe::*g, uint32_t pass_bit, uint32_t a_role,
              uint32_t b_role, uint32_t accum_role) {
  add_operand(
      t, {"gemm", pass, "a"}, pass_bit | a_role, [g](auto& r) -> auto& { return (r.*g).a; });
  add_operand(
      t, {"gemm", pass, "b"}, pass_bit | b_role, [g](auto& r) -> auto& { return (r.*g).b; });
  // The spec as written is what a report shows; the resolved model travels with it.
  add(
      t, {"gemm", pass, "accum"}, pass_bit | accum_role,
      [g](Recipe& to, const Recipe& from) { (to.*g).accum = (from.*g).accum; },
      [g](const Recipe& a, const Recipe& b) { return (a.*g).accum.spec == (b.*g).accum.spec; });
}

std::vector<PartKey> build_table() {
  std::vector<PartKey> t;
  add_tensor_format(
      t, {"weights"}, kPartWeights, [](auto& r) -> auto& { return r.weights; });
  add_tensor_format(
      t, {"activations"}, kPartActivations, [](auto& r) -> auto& { return r.activations; });
  add_tensor_format(
      t, {"activation_grads"}, kPartActivationGrads, [](auto& r) -> auto& { return r.activation_grads; });
  add_tensor_format(
      t, {"weight_grads"}, kPartWeightGrads, [](auto& r) -> auto& { return r.weight_grads; });
  add_gemm(t, "forward", &Recipe::forward, kPartForward, kPartActivations, kPartWeights, kPartActivations);
  add_gemm(t, "dgrad", &Recipe::dgrad, kPartDgrad, kPartActivationGrads, kPartWeights, kPartActivationGrads);
  add_gemm(t, "wgrad", &Recipe::wgrad, kPartWgrad, kPartActivationGrads, kPartActivations, kPartWeightGrads);
  add_value(
      t, {"attention", "products"}, kPartActivations, [](auto& r) -> auto& { return r.attention.products_in_recipe; });
  add_tensor_format(
      t, {"attention", "scores"}, kPartActivations, [](auto& r) -> auto& { return r.attention.scores; });
  add_value(
      t, {"attention", "opmath"}, kPartActivations, [](auto& r) -> auto& { return r.attention.low_opmath; });
  // The NVFP4 / MX switches belong to no role group: a part sets them only by naming them.
  add_value(
      t, {"rht"}, 0, [](auto& r) -> auto& { return r.block.rht; });
  add_value(
      t, {"rht_size"}, 0, [](auto& r) -> auto& { return r.block.rht_size; });
  add_value(
      t, {"weights_2d"}, 0, [](auto& r) -> auto& { return r.block.weights_2d; });
  add_value(
      t, {"sr_gradients"}, 0, [](auto& r) -> auto& { return r.block.sr_gradients; });
  add_value(
      t, {"four_over_six"}, 0, [](auto& r) -> auto& { return r.block.four_over_six; });
  add_value(
      t, {"mx_scale_rule"}, 0, [](auto& r) -> auto& { return r.block.mx_scale_rule; });
  return t;
}

}  // namespace

std::span<const PartKey> part_key_table() {
  static const std::vector<PartKey> table = [] {
    std::vector<PartKey> t = build_table();
    if (t.size() > 64) throw std::logic_error("part_key_table: more leaves than RecipePart::keys has bits");
    return t;
  }();
  return table;
}

uint64_t part_keys_at(std::initializer_list<std::string_view> dotted) {
  const auto table = part_key_table();
  uint64_t keys = 0;
  for (std::string_view d : dotted) {
    uint64_t found = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      const std::string& k = table[i].dotted;
      if (k == d || (k.starts_with(d) && k.size() > d.size() && k[d.size()] == '.')) found |= uint64_t{1} << i;
    }
    if (!found) throw std::invalid_argument(fmt::format("part_keys_at: '{}' names no recipe key a part may set", d));
    keys |= found;
  }
  return keys;
}

uint64_t part_keys_of_roles(uint32_t bits) {
  const auto table = part_key_table();
  uint64_t keys = 0;
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].roles & bits) keys |= uint64_t{1} << i;
  return keys;
}

void copy_part_keys(Recipe& to, const Recipe& from, uint64_t keys) {
  const auto table = part_key_table();
  for (size_t i = 0; i < table.size(); ++i)
    if (keys >> i & 1) table[i].copy(to, from);
}

bool same_part_keys(const Recipe& a, const Recipe& b, uint64_t keys) {
  const auto table = part_key_table();
  for (size_t i = 0; i < table.size(); ++i)
    if ((keys >> i & 1) && !table[i].same(a, b)) return false;
  return true;
}

bool operator==(const RecipePart& a, const RecipePart& b) {
  if (a.name != b.name || a.preset != b.preset || a.keys != b.keys) return false;
  return a.keys == 0 || (a.values && b.values && same_part_keys(*a.values, *b.values, a.keys));
}

}  // namespace precsim

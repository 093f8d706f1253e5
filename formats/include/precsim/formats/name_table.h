// The names of an enum's values: one table serves to_string and parsing, and a parse error lists
// every allowed name.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace precsim {

template <class E, size_t N>
struct NameTable {
  std::array<std::pair<E, std::string_view>, N> entries;

  // "?" for a value the table does not name.
  constexpr std::string_view name(E v) const {
    for (const auto& [e, n] : entries)
      if (e == v) return n;
    return "?";
  }
  // The names in table order, comma-separated.
  std::string allowed() const {
    std::string s;
    for (const auto& [e, n] : entries) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }
  // Throws std::invalid_argument "unknown <what> '<s>'; allowed: <names>".
  E parse(std::string_view s, std::string_view what) const {
    for (const auto& [e, n] : entries)
      if (n == s) return e;
    throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(s) + "'; allowed: " + allowed());
  }
};

// name_table<Rounding>({{Rounding::kUp, "up"}, ...}): N is the number of entries.
template <class E, size_t N>
constexpr NameTable<E, N> name_table(const std::pair<E, std::string_view> (&entries)[N]) {
  NameTable<E, N> t{};
  for (size_t i = 0; i < N; ++i) t.entries[i] = entries[i];
  return t;
}

}  // namespace precsim

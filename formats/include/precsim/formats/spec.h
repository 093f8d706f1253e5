// One grammar for everything named with options: NAME[:option...], an option being KEY=VALUE or a
// bare FLAG. Formats ("e4m3:bias=8:fnuz"), block-scaling schemes ("mxfp4:rule=rceil:axis=0"),
// accumulation models ("h100:F=30") and distributions ("normal:std=2") are all read by
// parse_spec; each caller then decides what its keys mean. Errors name the spec, the part and its
// column, so that a long spec on a command line or in a JSON config is easy to fix.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace precsim {

struct SpecOption {
  std::string text;                  // the part as written ("rule=rceil", "nosub")
  std::string key;                   // before '=' (the whole part for a flag)
  std::optional<std::string> value;  // after '=' ("" for "key="); nullopt for a flag
  size_t column = 0;                 // 1-based column of the part's first character in the spec
  bool is_flag() const { return !value.has_value(); }
};

// How a family of specs is written.
struct SpecSyntax {
  std::string_view what = "spec";     // the noun of error messages: "scheme", "distribution", ...
  std::string_view separators = ":";  // characters that end a part (distributions also take ',')
  bool later_key_overrides = false;   // true: "h100:F=30:F=31" means F=31 (so that text appended
                                      // to a spec overrides it); false: a repeated key is an error
};

struct Spec {
  std::string text;                  // the whole spec as given
  std::string name;                  // the part before the first separator
  std::vector<SpecOption> options;   // in the order written
  std::string_view what = "spec";

  // The last option with this key, or nullptr.
  const SpecOption* find(std::string_view key) const;
  // std::invalid_argument "<what> '<text>': <why>" and, for an option, " (column N)".
  std::invalid_argument error(std::string_view why) const;
  std::invalid_argument error(const SpecOption& o, std::string_view why) const;
  // The options whose key is not in `known`, in order.
  std::vector<const SpecOption*> unknown(std::initializer_list<std::string_view> known) const;
};

// Splits a spec. Throws std::invalid_argument (naming the column) for: an empty spec or name,
// whitespace, an empty part ("a::b", a trailing separator), '=' with no key ("a:=3"), and a
// repeated key unless the syntax lets a later key override.
Spec parse_spec(std::string_view text, const SpecSyntax& syntax = {});

// "a, b, c": for the "allowed: ..." part of messages.
std::string join_names(std::initializer_list<std::string_view> names);

}  // namespace precsim

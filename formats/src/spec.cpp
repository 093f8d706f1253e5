#include "precsim/formats/spec.h"

#include <cctype>

namespace precsim {

const SpecOption* Spec::find(std::string_view key) const {
  const SpecOption* found = nullptr;
  for (const auto& o : options)
    if (o.key == key) found = &o;
  return found;
}

std::invalid_argument Spec::error(std::string_view why) const {
  return std::invalid_argument(std::string(what) + " '" + text + "': " + std::string(why));
}

std::invalid_argument Spec::error(const SpecOption& o, std::string_view why) const {
  return std::invalid_argument(std::string(what) + " '" + text + "': " + std::string(why) + " (column " +
                               std::to_string(o.column) + ")");
}

std::vector<const SpecOption*> Spec::unknown(std::initializer_list<std::string_view> known) const {
  std::vector<const SpecOption*> out;
  for (const auto& o : options) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || o.key == k;
    if (!ok) out.push_back(&o);
  }
  return out;
}

std::string join_names(std::initializer_list<std::string_view> names) {
  std::string s;
  for (std::string_view n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

Spec parse_spec(std::string_view text, const SpecSyntax& syntax) {
  Spec s;
  s.text = std::string(text);
  s.what = syntax.what;
  auto fail_at = [&](size_t i, const std::string& why) {
    return s.error(why + " (column " + std::to_string(i + 1) + ")");
  };
  if (text.empty()) throw s.error("empty; expected NAME[:option...]");
  for (size_t i = 0; i < text.size(); ++i)
    if (std::isspace(static_cast<unsigned char>(text[i]))) throw fail_at(i, "whitespace");
  size_t end = text.find_first_of(syntax.separators);
  s.name = std::string(text.substr(0, end));
  if (s.name.empty()) throw fail_at(0, "no name before '" + std::string(1, text[0]) + "'");
  while (end != std::string_view::npos) {
    const size_t start = end + 1;
    end = text.find_first_of(syntax.separators, start);
    const std::string_view part = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (part.empty()) throw fail_at(start, "empty option");
    SpecOption o;
    o.text = std::string(part);
    o.column = start + 1;
    const size_t eq = part.find('=');
    if (eq == 0) throw fail_at(start, "'" + o.text + "' has no key before '='");
    o.key = std::string(part.substr(0, eq));
    if (eq != std::string_view::npos) o.value = std::string(part.substr(eq + 1));
    if (!syntax.later_key_overrides)
      if (const SpecOption* prev = s.find(o.key))
        throw fail_at(start, "'" + o.key + "' given twice (first at column " + std::to_string(prev->column) + ")");
    s.options.push_back(std::move(o));
  }
  return s;
}

}  // namespace precsim

#include "precsim/reports/json_path.h"

#include <fnmatch.h>

#include <cstring>
#include <stdexcept>

#include "precsim/reports/report.h"

namespace precsim {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    out.emplace_back(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string join_path(const std::vector<std::string>& segments) {
  std::string s;
  for (const auto& seg : segments) s += (s.empty() ? "" : ".") + seg;
  return s;
}

std::string readable_path(const nlohmann::json& doc, const std::string& path) {
  const size_t space = path.find(' ');
  const std::string tail = space == std::string::npos ? "" : path.substr(space);
  const nlohmann::json* at = &doc;
  std::string out;
  for (const auto& seg : split_path(path.substr(0, space))) {
    std::string shown = (out.empty() ? "" : ".") + seg;
    if (at != nullptr && at->is_object() && at->contains(seg)) {
      at = &(*at)[seg];
    } else if (at != nullptr && at->is_array() && !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos &&
               std::stoull(seg) < at->size()) {
      at = &(*at)[std::stoull(seg)];
      for (const char* key : {"name", "scheme", "model"})
        if (at->is_object() && at->contains(key) && (*at)[key].is_string()) {
          shown = "[" + (*at)[key].get<std::string>() + "]";
          break;
        }
      if (shown.front() != '[' && at->is_object() && at->contains("seed") && (*at)["seed"].is_number())
        shown = "[seed=" + (*at)["seed"].dump() + "]";
    } else {
      at = nullptr;
    }
    out += shown;
  }
  return out + tail;
}

namespace {

bool match_from(const std::vector<std::string>& pat, size_t i, const std::vector<std::string>& path, size_t j) {
  if (i == pat.size()) return j == path.size();
  if (pat[i] == "**") {
    for (size_t k = j; k <= path.size(); ++k)
      if (match_from(pat, i + 1, path, k)) return true;
    return false;
  }
  if (j == path.size()) return false;
  if (fnmatch(pat[i].c_str(), path[j].c_str(), 0) != 0) return false;
  return match_from(pat, i + 1, path, j + 1);
}

}  // namespace

bool path_matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path) {
  return match_from(pattern, 0, path, 0);
}

bool path_matches(std::string_view pattern, std::string_view path) {
  return path_matches(split_path(pattern), split_path(path));
}

namespace {

// A whole C99 hex-float ("0x1.8p-3"): text that only looks like one ("0x1.8p3+1") is text, so that
// is_numeric and numeric_value agree on every string.
bool is_hex_float_text(const std::string& s) {
  const size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (!(s.size() > i + 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        s.find_first_of("pP") != std::string::npos))
    return false;
  try {
    parse_real(s);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

bool is_numeric(const nlohmann::json& j) {
  if (j.is_number()) return true;
  if (!j.is_string()) return false;
  const auto& s = j.get_ref<const std::string&>();
  return s == "nan" || s == "inf" || s == "-inf" || is_hex_float_text(s);
}

double numeric_value(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan" || s == "inf" || s == "-inf" || is_hex_float_text(s)) return parse_real(s);
  }
  throw std::invalid_argument("expected a number (or \"nan\", \"inf\", \"-inf\", a hex-float), got " + j.dump());
}

bool is_numeric_array(const nlohmann::json& j) {
  if (!j.is_array() || j.size() < 2) return false;
  for (const auto& e : j)
    if (!is_numeric(e)) return false;
  return true;
}

void for_each_leaf(const nlohmann::json& j, const std::string& prefix, bool series_as_leaf,
                   const std::function<void(const std::string&, const nlohmann::json&)>& leaf) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      for_each_leaf(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), series_as_leaf, leaf);
  } else if (j.is_array() && !(series_as_leaf && is_numeric_array(j))) {
    for (size_t i = 0; i < j.size(); ++i)
      for_each_leaf(j[i], prefix.empty() ? std::to_string(i) : prefix + "." + std::to_string(i), series_as_leaf, leaf);
    if (j.empty()) leaf(prefix, j);
  } else {
    leaf(prefix, j);
  }
}

bool json_identical(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    uint64_t bx, by;
    std::memcpy(&bx, &x, sizeof bx);
    std::memcpy(&by, &y, sizeof by);
    return bx == by;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_identical(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto jt = b.find(it.key());
      if (jt == b.end() || !json_identical(it.value(), *jt)) return false;
    }
    return true;
  }
  return a == b;
}

std::string scalar_text(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "null";
  return j.dump();
}

}  // namespace precsim

#include "csv_table.h"

#include "precsim/reports/json_path.h"

namespace precsim {

std::string csv_field(const nlohmann::json& j) {
  std::string s = j.is_object() || j.is_array() ? j.dump() : scalar_text(j);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void CsvTable::set(const std::string& column, const nlohmann::json& value) {
  auto [it, added] = index_.try_emplace(column, columns_.size());
  if (added) columns_.push_back(column);
  if (!value.is_null()) rows_.back()[it->second] = csv_field(value);  // null: an empty cell
}

void CsvTable::set_leaves(const std::string& prefix, const nlohmann::json& j) {
  for_each_leaf(j, prefix, false, [&](const std::string& path, const nlohmann::json& v) {
    if (!v.is_array() && !v.is_object()) set(path, v);  // an empty array or object has no cell
  });
}

std::string CsvTable::text() const {
  std::string t;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (c) t += ',';
    t += csv_field(columns_[c]);
  }
  t += '\n';
  for (const auto& row : rows_) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c) t += ',';
      if (const auto it = row.find(c); it != row.end()) t += it->second;
    }
    t += '\n';
  }
  return t;
}

}  // namespace precsim

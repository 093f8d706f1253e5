// A CSV table built row by row: columns in the order first set, a cell left empty where a row has
// no value. Cells are scalars only (reports' text for numbers), so a spreadsheet never meets JSON.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

// One CSV field: a scalar as scalar_text, quoted where it holds a comma, quote or line break.
std::string csv_field(const nlohmann::json& j);

class CsvTable {
 public:
  void new_row() { rows_.emplace_back(); }
  // null leaves the cell empty (a seed that did not diverge has no diverged_at).
  void set(const std::string& column, const nlohmann::json& value);
  // Every scalar under `j` as column prefix.path (numeric arrays too, element by element).
  void set_leaves(const std::string& prefix, const nlohmann::json& j);
  bool empty() const { return rows_.empty(); }
  std::string text() const;

 private:
  std::vector<std::string> columns_;
  std::map<std::string, size_t> index_;
  std::vector<std::map<size_t, std::string>> rows_;
};

}  // namespace precsim

#include "export_analyze_csv.h"

#include "csv_table.h"
#include "precsim/reports/json_path.h"

namespace precsim {
namespace {

using nlohmann::json;

std::string shape_text(const json& shape) {
  std::string s;
  for (const auto& d : shape) s += (s.empty() ? "" : "x") + scalar_text(d);
  return s;
}

// Scalars of a record, and the leaves of the objects named in `nested`; arrays are left out.
void set_scalars(CsvTable& t, const json& record, std::initializer_list<const char*> nested) {
  for (auto it = record.begin(); it != record.end(); ++it) {
    if (!it.value().is_object() && !it.value().is_array()) t.set(it.key(), it.value());
    for (const char* n : nested)
      if (it.key() == n && it.value().is_object()) t.set_leaves(n, it.value());
  }
}

void histogram_rows(CsvTable& t, const json& bins, const json& tensor, const json* scheme) {
  for (const auto& b : bins) {
    t.new_row();
    t.set("tensor", tensor["name"]);
    if (scheme) t.set("scheme", (*scheme)["scheme"]);
    t.set("exponent", b["exponent"]);
    t.set("count", b["count"]);
  }
}

}  // namespace

bool export_analyze_csv(const json& results, const std::function<void(const std::string&, const std::string&)>& write) {
  if (!results.is_object() || !results.contains("tensors") || !results["tensors"].is_array()) return false;
  for (const auto& t : results["tensors"])
    if (!t.is_object() || !t.contains("schemes") || !t.contains("name")) return false;
  CsvTable tensors, schemes, exponents, scales;
  for (const auto& t : results["tensors"]) {
    tensors.new_row();
    tensors.set("name", t["name"]);
    tensors.set("shape", shape_text(t.value("shape", json::array())));
    set_scalars(tensors, t, {});
    histogram_rows(exponents, t.value("exponent_histogram", json::array()), t, nullptr);
    for (const auto& s : t["schemes"]) {
      schemes.new_row();
      schemes.set("tensor", t["name"]);
      set_scalars(schemes, s, {"window"});
      histogram_rows(scales, s.value("scale_log2_histogram", json::array()), t, &s);
    }
  }
  write("analyze_tensors.csv", tensors.text());
  write("analyze_schemes.csv", schemes.text());
  write("analyze_exponents.csv", exponents.text());
  if (!scales.empty()) write("analyze_scales.csv", scales.text());
  return true;
}

}  // namespace precsim

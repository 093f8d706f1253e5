#include "precsim/reports/export_csv.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "csv_table.h"
#include "export_analyze_csv.h"
#include "export_train_csv.h"
#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

std::string csv_name(const std::string& path) {
  std::string name = path.rfind("results.", 0) == 0 ? path.substr(8) : path;
  for (char& c : name)
    if (c == '/' || c == '\\') c = '_';
  return name + ".csv";
}

struct Exporter {
  std::filesystem::path dir;
  std::vector<std::string> written;
  std::string scalars = "path,value\n";

  void write(const std::string& name, const std::string& text) {
    write_file_atomic(dir / name, text);
    written.push_back(name);
  }

  // A record's nested objects and arrays become dotted columns, so no cell holds JSON.
  void table(const std::string& path, const nlohmann::json& rows) {
    CsvTable t;
    for (const auto& r : rows) {
      t.new_row();
      for (auto it = r.begin(); it != r.end(); ++it) {
        if (it.value().is_object() || it.value().is_array()) t.set_leaves(it.key(), it.value());
        else t.set(it.key(), it.value());
      }
    }
    write(csv_name(path), t.text());
  }

  void series(const std::string& path, const nlohmann::json* steps, const nlohmann::json& values) {
    std::string t = steps ? "step,value\n" : "index,value\n";
    for (size_t i = 0; i < values.size(); ++i)
      t += (steps ? csv_field((*steps)[i]) : std::to_string(i)) + "," + csv_field(values[i]) + "\n";
    write(csv_name(path), t);
  }

  void walk(const std::string& path, const nlohmann::json& j) {
    const bool records = j.is_array() && !j.empty() && std::all_of(j.begin(), j.end(), [](const auto& e) { return e.is_object(); });
    if (j.is_object() && j.contains("step") && j.contains("value") && j["step"].is_array() && j["value"].is_array() &&
        j["step"].size() == j["value"].size()) {
      series(path, &j["step"], j["value"]);
    } else if (records) {
      table(path, j);
    } else if (is_numeric_array(j)) {
      series(path, nullptr, j);
    } else if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) walk(path + "." + it.key(), it.value());
    } else if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) walk(path + "." + std::to_string(i), j[i]);
    } else {
      scalars += csv_field(path) + "," + csv_field(j) + "\n";
    }
  }
};

}  // namespace

std::vector<std::string> export_csv(const nlohmann::json& doc, const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directory(dir, ec))
    throw std::runtime_error("cannot create the folder '" + dir.string() + "': " + ec.message());
  Exporter x{dir, {}, "path,value\n"};
  std::string config = "path,value\n";
  for (const char* section : {"config", "seeds"})
    for_each_leaf(doc[section], section, false,
                  [&](const std::string& p, const nlohmann::json& v) { config += csv_field(p) + "," + csv_field(v) + "\n"; });
  x.write("config.csv", config);
  const nlohmann::json& results = doc["results"];
  const auto write = [&](const std::string& name, const std::string& text) { x.write(name, text); };
  if (export_train_csv(results, write)) {
    for (auto it = results.begin(); it != results.end(); ++it)
      if (it.key() != "runs" && it.key() != "variants") x.walk("results." + it.key(), it.value());
  } else if (doc.value("kind", "") == "analyze" && export_analyze_csv(results, write)) {
    for (auto it = results.begin(); it != results.end(); ++it)
      if (it.key() != "tensors") x.walk("results." + it.key(), it.value());
  } else {
    x.walk("results", results);
  }
  x.write("scalars.csv", x.scalars);
  return x.written;
}

}  // namespace precsim

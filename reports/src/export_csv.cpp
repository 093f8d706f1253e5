#include "precsim/reports/export_csv.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

std::string csv_field(const nlohmann::json& j) {
  std::string s = j.is_object() || j.is_array() ? j.dump() : scalar_text(j);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

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

  void table(const std::string& path, const nlohmann::json& rows) {
    std::vector<std::string> cols;
    for (const auto& r : rows)
      for (auto it = r.begin(); it != r.end(); ++it)
        if (std::find(cols.begin(), cols.end(), it.key()) == cols.end()) cols.push_back(it.key());
    std::string t;
    for (size_t c = 0; c < cols.size(); ++c) {
      if (c) t += ',';
      t += csv_field(cols[c]);
    }
    t += '\n';
    for (const auto& r : rows) {
      for (size_t c = 0; c < cols.size(); ++c) {
        if (c) t += ',';
        if (r.contains(cols[c])) t += csv_field(r[cols[c]]);
      }
      t += '\n';
    }
    write(csv_name(path), t);
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
  x.walk("results", doc["results"]);
  x.write("scalars.csv", x.scalars);
  return x.written;
}

}  // namespace precsim

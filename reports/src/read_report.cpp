#include "precsim/reports/read_report.h"

#include <cstdio>
#include <fstream>
#include <system_error>

#include "precsim/reports/json_path.h"
#include "precsim/reports/report.h"

namespace precsim {

const std::vector<std::string>& report_kinds() {
  static const std::vector<std::string> k = {"formats", "quantize", "analyze", "dot", "mma", "gemm", "allreduce", "train", "sweep", "attribute", "search"};
  return k;
}

bool is_report_kind(std::string_view kind) {
  for (const auto& k : report_kinds())
    if (k == kind) return true;
  if (kind.rfind("gpu-", 0) != 0 || kind.size() == 4) return false;
  for (char c : kind.substr(4))
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

namespace {

// Readers walk documents recursively; nesting deeper than any report has is refused up front
// (a scan of the text, before the parser or any walk can exhaust the stack).
constexpr int kMaxDepth = 256;

void check_depth(std::string_view text, const std::string& source) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        throw ReportError("'" + source + "': nested deeper than " + std::to_string(kMaxDepth) + " levels; not a precsim report");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

nlohmann::json parse_report_text(std::string_view text, const std::string& source) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) throw ReportError("'" + source + "': empty, not a precsim report");
  check_depth(text, source);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // An error at the very end of the text means the document stopped early: a truncated file.
    if (e.byte >= text.size())
      throw ReportError("'" + source + "': truncated JSON (the document ends after " + std::to_string(text.size()) +
                        " bytes); not a complete precsim report");
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ..."; keep
    // only the part after "parse error" (it names the line, column and the unexpected token).
    const std::string what = e.what();
    const size_t at = what.find("parse error");
    throw ReportError("'" + source + "': not JSON: " + (at == std::string::npos ? what : what.substr(at)));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond double's range ("1e999"): nlohmann says "number overflow parsing '1e999'".
    const std::string what = e.what();
    const size_t at = what.find("number overflow");
    throw ReportError("'" + source + "': not a precsim report: " + (at == std::string::npos ? what : what.substr(at)) +
                      " (numbers must fit in a double; non-finite values are written \"inf\", \"-inf\", \"nan\")");
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ReportError("'" + path.string() + "': is a folder, not a report file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportError("'" + path.string() + "': cannot open (missing or unreadable)");
  std::string text;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) text.reserve(size);
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  nlohmann::json j = parse_report_text(text, path.string());
  return j;
}

namespace {

const char* type_name(const nlohmann::json& j) { return j.type_name(); }

void need(const nlohmann::json& doc, const std::string& source, const char* key, bool (nlohmann::json::*is)() const noexcept,
          const char* what) {
  const auto it = doc.find(key);
  if (it == doc.end()) throw ReportError("'" + source + "': not a precsim report: no \"" + key + "\" field");
  if (!((*it).*is)())
    throw ReportError("'" + source + "': \"" + key + "\" must be " + what + ", got " + type_name(*it));
}

}  // namespace

void check_envelope(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object())
    throw ReportError("'" + source + "': not a precsim report: the document is a JSON " + type_name(doc) + ", not an object");
  need(doc, source, "schema", &nlohmann::json::is_string, "a string");
  const auto schema = doc["schema"].get<std::string>();
  if (schema != kReportSchema)
    throw ReportError("'" + source + "': schema '" + schema + "' is not supported; this precsim reads " +
                      std::string(kReportSchema));
  need(doc, source, "kind", &nlohmann::json::is_string, "a string");
  const auto kind = doc["kind"].get<std::string>();
  if (!is_report_kind(kind)) {
    std::string allowed;
    for (const auto& k : report_kinds()) allowed += k + ", ";
    throw ReportError("'" + source + "': unknown report kind '" + kind + "'; allowed: " + allowed + "gpu-<name>");
  }
  need(doc, source, "status", &nlohmann::json::is_string, "a string");
  const auto status = doc["status"].get<std::string>();
  if (status != "complete" && status != "interrupted")
    throw ReportError("'" + source + "': status '" + status + "' is not one of complete, interrupted");
  need(doc, source, "tool", &nlohmann::json::is_object, "an object");
  need(doc, source, "config", &nlohmann::json::is_object, "an object");
  need(doc, source, "seeds", &nlohmann::json::is_object, "an object");
  need(doc, source, "results", &nlohmann::json::is_object, "an object");
  need(doc, source, "digest", &nlohmann::json::is_string, "a string");
  if (doc.contains("environment") && !doc["environment"].is_object())
    throw ReportError("'" + source + "': \"environment\" must be an object");
}

nlohmann::json load_report(const std::filesystem::path& path) {
  nlohmann::json doc = read_json_file(path);
  check_envelope(doc, path.string());
  return doc;
}

namespace {

// The per-kind rules of reports/schema/precsim.report.schema.json, for formats and quantize.
struct Checker {
  std::vector<std::string>& problems;

  void require(const nlohmann::json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    if (!obj.is_object()) {
      problems.push_back(path + ": must be an object, got " + obj.type_name());
      return;
    }
    for (const char* k : keys)
      if (!obj.contains(k)) problems.push_back(path + ": missing \"" + k + "\"");
  }
  void number(const nlohmann::json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (obj.contains(k) && !is_numeric(obj[k]))
        problems.push_back(path + "." + k + ": must be a number or \"nan\"/\"inf\"/\"-inf\", got " + obj[k].dump());
  }
  void integer(const nlohmann::json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (obj.contains(k) && !obj[k].is_number_integer()) problems.push_back(path + "." + k + ": must be an integer, got " + obj[k].dump());
  }
  void one_of(const nlohmann::json& obj, const std::string& path, const char* key, std::initializer_list<const char*> allowed) {
    if (!obj.contains(key)) return;
    for (const char* a : allowed)
      if (obj[key] == a) return;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    problems.push_back(path + "." + key + ": " + obj[key].dump() + " is not one of " + list);
  }
};

void validate_formats(const nlohmann::json& doc, Checker& c) {
  const auto& res = doc["results"];
  c.require(res, "results", {"formats"});
  if (!res.contains("formats")) return;
  if (!res["formats"].is_array() || res["formats"].empty()) {
    c.problems.push_back("results.formats: must be a non-empty array");
    return;
  }
  for (size_t i = 0; i < res["formats"].size(); ++i) {
    const auto& f = res["formats"][i];
    const std::string p = "results.formats." + std::to_string(i);
    c.require(f, p, {"name", "aliases", "bits", "exponent_bits", "mantissa_bits", "bias", "kind", "nonfinite", "signed",
                     "has_zero", "subnormals", "emin", "emax", "max_finite", "min_normal", "min_subnormal", "epsilon",
                     "finite_values", "range_binades"});
    if (!f.is_object()) continue;
    c.integer(f, p, {"bits", "exponent_bits", "mantissa_bits", "bias", "emin", "emax", "finite_values"});
    c.number(f, p, {"max_finite", "min_normal", "min_subnormal", "epsilon", "range_binades"});
    c.one_of(f, p, "kind", {"float", "int"});
    c.one_of(f, p, "nonfinite", {"ieee", "nan-only", "finite-only", "fnuz"});
  }
}

void validate_quantize(const nlohmann::json& doc, Checker& c) {
  const auto& cfg = doc["config"];
  c.require(cfg, "config", {"format", "options", "mode"});
  c.one_of(cfg, "config", "mode", {"values", "array-values", "array-codes", "array-scheme-values", "array-scheme-codes"});
  if (cfg.contains("format")) c.require(cfg["format"], "config.format", {"name", "exponent_bits", "mantissa_bits", "bias"});
  if (cfg.contains("options")) {
    c.require(cfg["options"], "config.options", {"rounding", "overflow", "flush_subnormals", "sr_bits", "sr_seed"});
    c.one_of(cfg["options"], "config.options", "overflow", {"ieee", "saturate"});
  }
  const auto& res = doc["results"];
  if (cfg.contains("mode") && cfg["mode"] == "values") {
    c.require(res, "results", {"values"});
    if (!res.contains("values") || !res["values"].is_array()) return;
    for (size_t i = 0; i < res["values"].size(); ++i) {
      const std::string p = "results.values." + std::to_string(i);
      const auto& row = res["values"][i];
      c.require(row, p, {"input", "input_hex", "code", "fields", "value", "value_hex", "abs_error", "rel_error", "status"});
      if (row.is_object()) c.number(row, p, {"input", "input_hex", "value", "value_hex", "abs_error", "rel_error"});
    }
  } else if (cfg.contains("mode") && cfg["mode"].is_string() && cfg["mode"].get<std::string>().starts_with("array-scheme")) {
    // A block-scaling scheme: analyze's per-scheme object.
    c.require(cfg, "config", {"scheme", "input", "shape"});
    c.require(res, "results", {"scheme", "nonfinite_inputs"});
    if (res.contains("scheme")) c.require(res["scheme"], "results.scheme", {"scheme", "qsnr_db", "mse", "blocks", "nonfinite_inputs"});
    if (cfg["mode"] == "array-scheme-codes") c.require(res, "results", {"packed"});
  } else if (cfg.contains("mode")) {
    c.require(res, "results", {"stats"});
    if (res.contains("stats")) {
      c.require(res["stats"], "results.stats", {"count", "inexact", "underflow_to_zero", "subnormal", "overflow", "saturated", "nan"});
      if (res["stats"].is_object())
        c.integer(res["stats"], "results.stats", {"count", "inexact", "underflow_to_zero", "subnormal", "overflow", "saturated", "nan"});
    }
  }
}

}  // namespace

std::vector<std::string> validate_report(const nlohmann::json& doc) {
  std::vector<std::string> problems;
  try {
    check_envelope(doc, "report");
  } catch (const ReportError& e) {
    problems.push_back(std::string(e.what()).substr(std::string("'report': ").size()));
    return problems;
  }
  const std::string recomputed = results_digest(doc["results"]);
  if (doc["digest"] != recomputed)
    problems.push_back("digest: stored " + doc["digest"].get<std::string>() + " but the results hash to " + recomputed +
                       " (the results were edited or corrupted)");
  Checker c{problems};
  const std::string kind = doc["kind"];
  if (kind == "formats") validate_formats(doc, c);
  if (kind == "quantize") validate_quantize(doc, c);
  return problems;
}

}  // namespace precsim

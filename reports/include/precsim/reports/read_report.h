// Reading reports back: every `precsim report` subcommand and every test goes through here, so a
// truncated, non-JSON, wrong-schema or wrong-kind file always gets the same clear message.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

// A file that is not a readable precsim report; the message names the file and the problem.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The report kinds of precsim.report/1; "gpu-" followed by a name is a kind too.
const std::vector<std::string>& report_kinds();
bool is_report_kind(std::string_view kind);

// Parses JSON text; throws ReportError("'<source>': ...") for empty, truncated or non-JSON text.
nlohmann::json parse_report_text(std::string_view text, const std::string& source);
// Reads and parses a file (missing, unreadable, a folder: ReportError).
nlohmann::json read_json_file(const std::filesystem::path& path);

// Checks the envelope: a JSON object with "schema" equal to precsim.report/1, a known "kind",
// "status" complete|interrupted, "tool", "config", "seeds", "results", "digest" of the right
// types. Throws ReportError naming the source and the first problem.
void check_envelope(const nlohmann::json& doc, const std::string& source);

// read_json_file + check_envelope.
nlohmann::json load_report(const std::filesystem::path& path);

// Everything `precsim report validate` checks, beyond the envelope: the stored digest against one
// recomputed from the results, and the per-kind rules mirrored from reports/schema (strict for
// formats and quantize). Returns the problems, empty when the report is valid.
std::vector<std::string> validate_report(const nlohmann::json& doc);

}  // namespace precsim

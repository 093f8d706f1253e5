// The report every command writes (docs/CONVENTIONS.md, Reports): one JSON document saying exactly what
// produced it, written atomically (--out) or printed alone on stdout (--json).
#pragma once

#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

inline constexpr std::string_view kReportSchema = "precsim.report/1";

std::string_view precsim_version();
std::string_view precsim_git_commit();

// JSON has no NaN or Inf: they travel as the strings "nan", "inf", "-inf".
nlohmann::json json_number(double v);
// Reads a number written by json_number (or any JSON number); throws std::invalid_argument.
double read_number(const nlohmann::json& j);
// C99 hex-float spelling of a double, exact and round-trippable: "0x1.8p-24", "-0x0p+0",
// "nan", "inf", "-inf".
std::string hex_float(double v);
// Parses decimal or C99 hex-float text (as strtod); throws std::invalid_argument naming the text.
double parse_real(std::string_view text);

// SHA-256 over the canonical serialisation of `results` (sorted keys, shortest round-trip
// numbers): the same results give the same digest on any machine.
std::string results_digest(const nlohmann::json& results);

class Report {
 public:
  explicit Report(std::string kind);

  const std::string& kind() const { return kind_; }
  nlohmann::json& config() { return config_; }      // the fully resolved configuration
  nlohmann::json& seeds() { return seeds_; }
  nlohmann::json& results() { return results_; }
  const nlohmann::json& results() const { return results_; }
  void set_command_line(int argc, const char* const* argv);
  void set_status(std::string status) { status_ = std::move(status); }  // "complete", "interrupted"

  // The whole document. Without `deterministic` it carries the environment block (date, wall
  // time, host, CPU, threads, C library, command line).
  nlohmann::json document(bool deterministic) const;

 private:
  std::string kind_;
  std::string status_ = "complete";
  nlohmann::json config_ = nlohmann::json::object();
  nlohmann::json seeds_ = nlohmann::json::object();
  nlohmann::json results_ = nlohmann::json::object();
  std::vector<std::string> argv_;
  std::chrono::steady_clock::time_point start_;
};

// Writes `content` to `path` atomically: a temporary file in the same folder, fsync, rename,
// fsync of the folder. A failure leaves no file and throws std::runtime_error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);
// The same for content in several pieces (a header and a large array), written without joining.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::string_view> parts);
// Fails early (std::runtime_error naming the path) when `path` could not be written, so that a
// long run does not end in an unwritable destination. Creates nothing.
void check_writable(const std::filesystem::path& path);

struct OutputOptions {
  std::string out;          // --out FILE ("" for none)
  bool json = false;        // --json: the report alone on stdout
  bool deterministic = false;
};
// Applies the --out / --json rule to a finished report.
void emit_report(const Report& r, const OutputOptions& o);

}  // namespace precsim

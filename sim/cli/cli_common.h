// Shared pieces of the command-line interface: subcommand registration, the --out/--json rule,
// and the exit-code convention (2: any command-line or input error, 3: no GPU, 1: a check failed).
#pragma once

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "precsim/reports/interrupt.h"
#include "precsim/reports/report.h"

namespace precsim::cli {

// A bad argument, value or input file: the message names the value and what is allowed.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// SIGINT or SIGTERM stopped a run after its report of what finished was written (exit 128 + signal).
struct Interrupted : std::runtime_error {
  Interrupted(const std::string& what, int exit_code) : std::runtime_error(what), exit_code(exit_code) {}
  int exit_code;
};
// No usable GPU (exit 3).
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDevice = 3;

// Each subcommand file registers itself with a static Registrar; `order` sorts --help.
using CommandSetup = std::function<void(CLI::App& root)>;
struct Registrar {
  Registrar(int order, CommandSetup setup);
};

// --threads N, 1..1024: OpenMP worker threads, set as the option is parsed (results do not depend
// on it); every command takes it (main.cpp adds it where a command does not). `threads` keeps N, or 0 when it is not given, for library calls that take a count.
CLI::Option* add_threads_option(CLI::App* cmd, int& threads);

// --seed's help: in every command --seed seeds every random draw the command makes; `what` names
// them.
inline std::string seed_help(const std::string& what) { return "seed of every random draw: " + what; }

// --quiet and --progress none|lines|bar, which every command takes (main.cpp adds them): how much
// goes to stderr besides errors and warnings.
enum class ProgressMode { kNone, kLines, kBar };
bool quiet();
// --progress, or by default a bar on a terminal and a line every few seconds elsewhere; none
// under --quiet.
ProgressMode progress_mode();
// std::cerr, or a stream that drops everything under --quiet: for "wrote FILE" and other notes.
std::ostream& note();

// --out FILE, --json, --deterministic.
void add_output_options(CLI::App* cmd, OutputOptions& o);
// Checks the --out destination before any long work starts; an --out ending in .npy is refused,
// since --out takes the JSON report and arrays go to --output.
void check_output(const OutputOptions& o);
// Checks that `path` can be written (its folder exists and is writable, it is not a folder);
// throws UsageError "<option>: ...".
void check_destination(const std::string& option, const std::string& path);
// Stamps the command line on a report and applies the --out/--json rule ("wrote FILE" on stderr).
void finish_report(Report& r, const OutputOptions& o);
// The same for a run that polled `guard` after each unit of work (so at least one unit finished):
// after SIGINT/SIGTERM the report is marked "interrupted", written, and Interrupted is thrown
// naming what finished (`done`, e.g. "3 of 12 tensors").
void finish_report(Report& r, const OutputOptions& o, const InterruptGuard& guard, const std::string& done);

// The process's argv, for reports.
int argc();
const char* const* argv();

}  // namespace precsim::cli

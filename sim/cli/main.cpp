// precsim: the command-line entry point. Subcommands live one per file in this folder and
// register themselves (cli_common.h).
#include <omp.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <regex>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace precsim::cli {
namespace {

struct Entry {
  int order;
  CommandSetup setup;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
bool g_quiet = false;
std::string g_progress;
int g_argc = 0;
const char* const* g_argv = nullptr;

// Edit distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string command_names(const CLI::App& app) {
  std::string names;
  for (const auto* c : app.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + c->get_name();
  return names;
}

// The first argument that is not an option names the command, and in a group (report, gpu) the
// next one its command; an unknown one is answered with the nearest command names and the list,
// not with CLI11's "argument was not expected" or "A subcommand is required".
void check_command_name(const CLI::App& app, const std::vector<std::string>& args, size_t from = 0,
                        const std::string& path = "precsim") {
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  const std::string of = path == "precsim" ? "" : " of '" + path + "'";
  bool unknown_root_option = false;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help" || a == "--help-all" || (a == "--version" && path == "precsim")) return;
    if (a == "--threads" || a == "--progress") {  // the options with a separate value
      ++i;
      continue;
    }
    if (a.starts_with("-")) {
      const bool everywhere = a == "-q" || a == "--quiet" || a.starts_with("--threads=") || a.starts_with("--progress=");
      if (everywhere) continue;
      if (path == "precsim") {  // an unknown option before any command: CLI11 names it
        unknown_root_option = true;
        continue;
      }
      throw UsageError("unknown option '" + a + "'" + of + "; give a command first: " + command_names(app));
    }
    const auto it = std::find_if(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->get_name() == a; });
    if (it != commands.end()) {
      if ((*it)->get_subcommands([](const CLI::App*) { return true; }).empty()) return;
      return check_command_name(**it, args, i + 1, path + " " + a);
    }
    std::string near;
    for (const auto* c : commands)
      if (distance(a, c->get_name()) <= 2 || c->get_name().starts_with(a))
        near += (near.empty() ? "" : " or ") + ("'" + c->get_name() + "'");
    throw UsageError("unknown command '" + a + "'" + of + (near.empty() ? "" : "; did you mean " + near + "?") +
                     "; commands: " + command_names(app));
  }
  if (unknown_root_option) return;
  throw UsageError("give a command" + of + ": " + command_names(app) + " (" + path + " --help says what each does)");
}

// "precsim help [CMD...]" is "precsim [CMD...] --help"; an unknown CMD is then answered by
// check_command_name with the commands there are.
std::vector<std::string> help_as_flag(std::vector<std::string> args) {
  if (args.empty() || args.front() != "help") return args;
  args.erase(args.begin());
  args.push_back("--help");
  return args;
}

// "-inf" (and "-infinity") is a value, not the options -i -n -f: CLI11 takes a token for a value
// only when a digit follows the '-', so it gets the same number spelt with one (parse_real reads
// -0x1p+1024 as -inf: the overflow rounds to it).
std::vector<std::string> respell_negative_infinity(std::vector<std::string> args) {
  for (auto& a : args) {
    std::string low = a;
    for (auto& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (low == "-inf" || low == "-infinity") a = "-0x1p+1024";
  }
  return args;
}

// A bound of CLI11's range message in words: "16777216" -> "2^24", "0.000000" -> "0".
std::string range_bound(const std::string& bound) {
  const long double v = std::strtold(bound.c_str(), nullptr);
  int exp = 0;
  if (v >= 0x1p20L && std::frexp(v, &exp) == 0.5L) return "2^" + std::to_string(exp - 1);
  if (bound.find('.') == std::string::npos) return bound;
  return fmt::format("{}", static_cast<double>(v));  // the shortest form that reads back
}

// CLI::Range's "--steps: Value -5 not in range 1 to 1099511627776" said as "--steps -5 is out of
// range; allowed: 1 to 2^40", and a value that is no number (or no integer, where the range is of
// integers) said as such; "" for any other message. One hook for every CLI::Range.
std::string range_message(const std::string& msg) {
  static const std::regex range(R"((\S+): Value (.*) not in range (\S+) to (\S+))");
  std::smatch m;
  if (!std::regex_match(msg, m, range)) return "";
  const std::string option = m[1], value = m[2], lo = m[3], hi = m[4];
  const bool integers = lo.find('.') == std::string::npos && hi.find('.') == std::string::npos;
  char* end = nullptr;
  std::strtold(value.c_str(), &end);
  const bool number = !value.empty() && *end == '\0';
  const bool whole = std::regex_match(value, std::regex(R"([+-]?(0[xX][0-9a-fA-F]+|[0-9]+))"));
  const std::string what = !number ? "is not a number" : integers && !whole ? "is not an integer" : "is out of range";
  const bool unbounded = std::strtold(hi.c_str(), nullptr) >= std::numeric_limits<double>::max();
  const std::string allowed = unbounded ? range_bound(lo) + " or more" : range_bound(lo) + " to " + range_bound(hi);
  return option + " " + value + " " + what + "; allowed: " + allowed;
}

// CLI11's message with the prefix every error has, and for an unknown option the options the
// command has.
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr)
    if (std::string r = range_message(msg); !r.empty()) return r;
  // The command the error is about: the innermost one parsed (precsim report summary ...).
  const CLI::App* cmd = &app;
  std::string path = "precsim";
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const auto* c : cmd->get_subcommands()) {
      cmd = c;
      deeper = true;
    }
    if (deeper) path += " " + cmd->get_name();
  }
  // CLI11 checks required options before unknown ones: an unknown option is named all the same.
  bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  if (!extras && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    std::string unknown;
    for (const auto& r : cmd->remaining())
      if (r.starts_with("-")) unknown += (unknown.empty() ? "" : " ") + r;
    if (!unknown.empty()) msg = "The following argument was not expected: " + unknown;
    extras = !unknown.empty();
    // A missing positional argument ("report is required"): said with the command's name.
    const std::string required = " is required";
    if (!extras && !msg.starts_with("-") && msg.ends_with(required) && msg.find(' ') == msg.size() - required.size())
      msg = "missing the " + msg.substr(0, msg.size() - required.size()) + " argument of '" + path + "'";
  }
  if (extras) {
    std::string opts;
    for (const auto* o : cmd->get_options())
      if (!o->get_lnames().empty() && !o->get_group().empty())  // not the hidden ones
        opts += (opts.empty() ? "" : ", ") + ("--" + o->get_lnames().front());
    msg += "; options of " + (cmd == &app ? path : "'" + path + "'") + ": " + opts;
  }
  return msg;
}

}  // namespace

Registrar::Registrar(int order, CommandSetup setup) { registry().push_back({order, std::move(setup)}); }
bool quiet() { return g_quiet; }

ProgressMode progress_mode() {
  if (g_quiet || g_progress == "none") return ProgressMode::kNone;
  if (g_progress == "lines") return ProgressMode::kLines;
  if (g_progress == "bar") return ProgressMode::kBar;
  return isatty(STDERR_FILENO) ? ProgressMode::kBar : ProgressMode::kLines;
}

std::ostream& note() {
  static std::ostream null_stream(nullptr);  // no buffer: every write is dropped
  return g_quiet ? null_stream : std::cerr;
}

namespace {
// The same two flags on the root and on every command, so that they go anywhere on the line.
void add_chatter_options(CLI::App* cmd) {
  cmd->add_flag("--quiet,-q", g_quiet, "only errors and warnings on stderr (no progress, no \"wrote FILE\")");
  cmd->add_option("--progress", g_progress,
                  "none|lines|bar: how training and sweeps show progress (default: a bar on a terminal, else a line "
                  "every few seconds with the time elapsed and an estimate of the time left)")
      ->check(CLI::IsMember({"none", "lines", "bar"}));
}
}  // namespace
int argc() { return g_argc; }
const char* const* argv() { return g_argv; }

CLI::Option* add_threads_option(CLI::App* cmd, int& threads) {
  return cmd->add_option("--threads", threads, "worker threads (default: all cores); results do not depend on it")
      ->check(CLI::Range(1, 1024))
      ->each([](const std::string& v) { omp_set_num_threads(std::stoi(v)); });
}

void add_output_options(CLI::App* cmd, OutputOptions& o) {
  cmd->add_option("--out", o.out, "write the JSON report to FILE (atomically)");
  cmd->add_flag("--json", o.json, "print the JSON report on stdout and nothing else");
  cmd->add_flag("--deterministic", o.deterministic,
                "leave out the environment block: same inputs give a byte-identical report");
}

void check_destination(const std::string& option, const std::string& path) {
  try {
    check_writable(path);
  } catch (const std::exception& e) {
    throw UsageError(option + ": " + e.what());
  }
}

void check_output(const OutputOptions& o) {
  if (o.out.empty()) return;
  if (o.out.ends_with(".npy"))
    throw UsageError("--out '" + o.out + "': --out takes the JSON report (FILE.json); the array goes to --output FILE.npy");
  check_destination("--out", o.out);
}

void finish_report(Report& r, const OutputOptions& o) {
  r.set_command_line(g_argc, g_argv);
  emit_report(r, o);
  if (!o.out.empty()) note() << "wrote " << o.out << "\n";
}

void finish_report(Report& r, const OutputOptions& o, const InterruptGuard& guard, const std::string& done) {
  if (guard.requested()) r.set_status("interrupted");
  finish_report(r, o);
  if (guard.requested())
    throw Interrupted("interrupted by signal " + std::to_string(guard.signal()) + " after " + done +
                          "; the report holds what finished",
                      guard.exit_code());
}

}  // namespace precsim::cli

int main(int argc, char** argv) {
  using namespace precsim::cli;
  g_argc = argc;
  g_argv = argv;
  CLI::App app{"precsim: numerical precision simulator for deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(precsim::precsim_version()) + " (" +
                                        std::string(precsim::precsim_git_commit()) + ")");
  int threads = 0;
  add_threads_option(&app, threads);
  auto& reg = registry();
  std::stable_sort(reg.begin(), reg.end(), [](const Entry& a, const Entry& b) { return a.order < b.order; });
  for (const auto& e : reg) e.setup(app);
  add_chatter_options(&app);
  int unused_threads = 0;
  const auto add_all = [&unused_threads](auto& self, CLI::App* parent) -> void {
    for (auto* c : parent->get_subcommands([](const CLI::App*) { return true; })) {
      if (c->get_option_no_throw("--threads") == nullptr) add_threads_option(c, unused_threads);
      add_chatter_options(c);
      self(self, c);
    }
  };
  add_all(add_all, &app);
  std::vector<std::string> args = help_as_flag({argv + 1, argv + argc});
  try {
    check_command_name(app, args);
    args = respell_negative_infinity(std::move(args));
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "precsim: error: " << parse_error_text(app, e) << "\n";
    return kExitUsage;
  } catch (const Interrupted& e) {
    std::cerr << "precsim: " << e.what() << "\n";
    return e.exit_code;
  } catch (const NoDevice& e) {
    std::cerr << "precsim: error: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::exception& e) {
    std::cerr << "precsim: error: " << e.what() << "\n";
    return kExitUsage;
  }
  return 0;
}

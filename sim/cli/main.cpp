// precsim: the command-line entry point. Subcommands live one per file in this folder and
// register themselves (cli_common.h).
#include <omp.h>

#include <algorithm>
#include <iostream>
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
int g_argc = 0;
const char* const* g_argv = nullptr;

}  // namespace

Registrar::Registrar(int order, CommandSetup setup) { registry().push_back({order, std::move(setup)}); }
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

void check_output(const OutputOptions& o) {
  if (o.out.empty()) return;
  try {
    check_writable(o.out);
  } catch (const std::exception& e) {
    throw UsageError(std::string("--out: ") + e.what());
  }
}

void finish_report(Report& r, const OutputOptions& o) {
  r.set_command_line(g_argc, g_argv);
  emit_report(r, o);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const Interrupted& e) {
    std::cerr << "precsim: " << e.what() << "\n";
    return e.exit_code;
  } catch (const NoDevice& e) {
    std::cerr << "precsim: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::exception& e) {
    std::cerr << "precsim: error: " << e.what() << "\n";
    return kExitUsage;
  }
  return 0;
}

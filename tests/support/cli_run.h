// Runs the precsim binary built with the tests (PRECSIM_CLI) and captures its output and exit code.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace precsim::test_support {

struct CliRun {
  int rc;           // exit code, -1 if killed by a signal
  std::string out;  // stdout, with stderr merged in when asked
};

inline CliRun run_precsim(const std::string& args, bool merge_stderr = true) {
  const std::string cmd = std::string(PRECSIM_CLI) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace precsim::test_support

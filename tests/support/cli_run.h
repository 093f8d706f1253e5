// Runs the precsim binary built with the tests (PRECSIM_CLI) and captures its output and exit code.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
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

struct CliSplitRun {
  int rc;
  std::string out, err;  // stdout and stderr apart
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A fixture with a fresh temporary folder per test, and a runner that keeps stderr apart
// (in a file of that folder) so that tests can check where messages go.
class CliTempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("precsim_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `env` is prepended to the shell command (e.g. "OMP_NUM_THREADS=1").
  CliSplitRun run_split(const std::string& args, const std::string& env = "") const {
    const std::filesystem::path err = dir_ / "stderr.txt";
    const std::string cmd = env + " '" + PRECSIM_CLI + "' " + args + " 2>'" + err.string() + "'";
    CliSplitRun r;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(err);
    return r;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace precsim::test_support

// write_file_atomic under SIGKILL: a writer killed in the middle of a large report leaves the
// previous file whole (or no file), never a partial one. The writer is a forked child writing
// 1 GiB; the parent kills it once its temporary file has grown past 8 MiB.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "precsim/reports/report.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The size of the writer's temporary file (".NAME.tmp.XXXXXX" beside the target), 0 if none yet.
uintmax_t temporary_size(const fs::path& dir, const std::string& name) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("." + name + ".tmp.", 0) == 0) return fs::file_size(e.path());
  return 0;
}

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("precsim_atomic_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Forks a writer of 1 GiB to `target` and SIGKILLs it mid-write; true if it was killed so.
  bool kill_writer_midway(const fs::path& target) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string chunk(4 << 20, 'x');
      const std::vector<std::string_view> parts(256, chunk);
      try {
        write_file_atomic(target, parts);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    // Until 8 MiB are written: to the temporary file, or (a writer that is not atomic) to the target.
    auto written = [&] {
      std::error_code ec;
      const uintmax_t direct = fs::file_size(target, ec);
      return std::max(temporary_size(dir_, target.filename().string()), ec ? uintmax_t{0} : direct);
    };
    while (written() < (8u << 20) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

  fs::path dir_;
};

TEST_F(AtomicWrite, AKilledWriterLeavesThePreviousReportWhole) {
  const fs::path target = dir_ / "report.json";
  const std::string previous = "{\"previous\": \"report\"}\n";
  write_file_atomic(target, previous);
  ASSERT_TRUE(kill_writer_midway(target)) << "the writer finished or failed before it could be killed";
  EXPECT_GE(temporary_size(dir_, "report.json"), 8u << 20);  // it was killed mid-write ...
  EXPECT_EQ(slurp(target), previous);                        // ... and the report is the old one
}

TEST_F(AtomicWrite, AKilledWriterLeavesNoFileWhereThereWasNone) {
  const fs::path target = dir_ / "fresh.json";
  ASSERT_TRUE(kill_writer_midway(target)) << "the writer finished or failed before it could be killed";
  EXPECT_FALSE(fs::exists(target));
}

}  // namespace
}  // namespace precsim

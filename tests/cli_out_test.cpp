// An --out that cannot be written fails at once, before any run starts, in every command that
// takes --out: exit 2, one line naming the path and why, and nothing left in the folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "../support/cli_run.h"

namespace precsim {
namespace {

// A command line per command with --out that would start a run (the slow ones too: the check
// comes first, so none runs).
const std::map<std::string, std::string> kRuns = {
    {"formats", "formats"},
    {"quantize", "quantize -f e4m3 1"},
    {"analyze", "analyze --dist normal --count 16 --formats e4m3"},
    {"dot", "dot --model fp32-seq --a 1 --b 1"},
    {"gemm", "gemm --m 4 --n 4 --k 4"},
    {"allreduce", "allreduce"},
    {"train", "train --recipes fp32"},
    {"demo", "demo"},
    {"attribute", "attribute --experiment tiny-gpt --recipe mxfp4"},
    {"search", "search --experiment tiny-gpt -f e2m1 --budget 6 --recipe fp32"},
    {"gpu info", "gpu info"},
    {"gpu gemm", "gpu gemm"},
    {"gpu probe", "gpu probe"},
    // --out is checked before the operands are read: the files need not exist.
    {"mma", "mma --model ampere/mma.m16n8k16.f32.bf16.bf16.f32 --a a.npy --b b.npy"},
};

class CliOut : public test_support::CliTempDirTest {
 protected:
  // Every command whose --help lists --out, found by walking the "Subcommands:" of the helps.
  std::vector<std::string> commands_with_out() const {
    std::vector<std::string> found, todo = {""};
    const std::regex sub(R"(\n  (\w+) )");
    while (!todo.empty()) {
      const std::string c = todo.back();
      todo.pop_back();
      const std::string help = run_split(c + " --help").out;
      if (help.find("\n  --out ") != std::string::npos) found.push_back(c);
      const size_t at = help.find("\nSubcommands:");
      if (at == std::string::npos) continue;
      const std::string subs = help.substr(at);
      for (std::sregex_iterator m(subs.begin(), subs.end(), sub), end; m != end; ++m)
        todo.push_back(c.empty() ? (*m)[1].str() : c + " " + (*m)[1].str());
    }
    std::sort(found.begin(), found.end());
    return found;
  }
  // `args --out out`: exit 2 with one line naming `out` and `why`, nothing on stdout, and the
  // test's folder as it was.
  void expect_refused(const std::string& args, const std::string& out, const std::string& why) const {
    run_split("--version");  // creates the runner's stderr.txt, so that the count below holds
    const auto before = std::distance(std::filesystem::directory_iterator(dir_), {});
    const test_support::CliSplitRun r = run_split(args + " --out '" + out + "'");
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "precsim: error: --out: cannot write '" + out + "': " + why + "\n") << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), before) << args << " left a file";
    EXPECT_FALSE(std::filesystem::exists(out) && !std::filesystem::is_directory(out)) << args;
  }
};

TEST_F(CliOut, EveryCommandWithOutHasARun) {
  std::vector<std::string> listed;
  for (const auto& [c, _] : kRuns) listed.push_back(c);
  EXPECT_EQ(commands_with_out(), listed);
}

TEST_F(CliOut, AnUnwritableOutFailsBeforeTheRun) {
  for (const auto& [c, args] : kRuns) {
    // /proc takes no new files, not even from root, whose access(W_OK) says yes.
    expect_refused(args, "/proc/x.json", "No such file or directory");
    expect_refused(args, path("missing/x.json"), "No such file or directory");
    std::filesystem::create_directory(path("folder"));
    expect_refused(args, path("folder"), "Is a directory");
  }
}

TEST_F(CliOut, AReadOnlyFolderFailsBeforeTheRun) {
  const std::filesystem::path ro = path("ro");
  std::filesystem::create_directory(ro);
  std::filesystem::permissions(ro, std::filesystem::perms(0555));
  // Root may write in a 0555 folder, and precsim with it: as root, precsim runs as nobody here.
  const std::string as = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "";
  for (const auto& [c, args] : kRuns) {
    const std::string out = (ro / "x.json").string();
    const test_support::CliSplitRun r = run_split(args + " --out '" + out + "'", as);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "precsim: error: --out: cannot write '" + out + "': Permission denied\n") << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_TRUE(std::filesystem::is_empty(ro)) << args;
  }
  std::filesystem::permissions(ro, std::filesystem::perms(0755));
}

}  // namespace
}  // namespace precsim

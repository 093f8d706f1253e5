// `precsim report ...` end to end through the CLI binary: exit codes, messages, determinism.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "../support/cli_run.h"
#include "precsim/reports/npy.h"

namespace {

namespace fs = std::filesystem;

using precsim::test_support::CliRun;
CliRun run(const std::string& args) { return precsim::test_support::run_precsim(args); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class ReportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("precsim_report_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::mt19937 gen(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(20000);
    for (float& v : x) v = nd(gen) * 1e-3f;
    precsim::write_npy(dir_ / "x.npy", "<f4", {x.size()}, x.data(), x.size() * 4);
    ASSERT_EQ(run("quantize -f e4m3 1.3 0x1p-10 1e9 --deterministic --out " + p("q.json")).rc, 0);
    ASSERT_EQ(run("quantize -f e4m3 1.3 0x1p-9 1e9 --deterministic --out " + p("q2.json")).rc, 0);
    ASSERT_EQ(run("formats --deterministic --out " + p("f.json")).rc, 0);
    const std::string q = slurp(dir_ / "q.json");
    std::ofstream(dir_ / "truncated.json") << q.substr(0, q.size() / 2);
    std::ofstream(dir_ / "garbage.json") << "this is not json";
    auto doc = nlohmann::json::parse(q);
    doc["schema"] = "precsim.report/7";
    std::ofstream(dir_ / "schema7.json") << doc.dump();
    doc["schema"] = "precsim.report/1";
    doc["kind"] = "banana";
    std::ofstream(dir_ / "banana.json") << doc.dump();
    doc["kind"] = "quantize";
    doc["results"]["values"][0]["value"] = 1.5;  // edited, digest not updated
    std::ofstream(dir_ / "edited.json") << doc.dump();
  }
  static std::string p(const std::string& name) { return (dir_ / name).string(); }
  static fs::path dir_;
};
fs::path ReportCli::dir_;

TEST_F(ReportCli, DeterministicReportsAreByteIdenticalAndThreadCountDoesNotChangeTheDigest) {
  const std::string args = "quantize -f bf16 --rounding stochastic --seed 9 --sr-bits 16 --input " + p("x.npy") + " --deterministic --out ";
  ASSERT_EQ(run("--threads 1 " + args + p("t1.json")).rc, 0);
  ASSERT_EQ(run("--threads 1 " + args + p("t1b.json")).rc, 0);
  ASSERT_EQ(run("--threads 2 " + args + p("t2.json")).rc, 0);
  EXPECT_EQ(slurp(dir_ / "t1.json"), slurp(dir_ / "t1b.json"));
  const auto a = nlohmann::json::parse(slurp(dir_ / "t1.json")), b = nlohmann::json::parse(slurp(dir_ / "t2.json"));
  EXPECT_EQ(a["digest"], b["digest"]);
  EXPECT_GT(a["results"]["stats"]["inexact"].get<int>(), 0);
  EXPECT_EQ(run("report check --baseline " + p("t1.json") + " " + p("t2.json")).rc, 0);
}

TEST_F(ReportCli, CheckPassesAgainstItselfAndNamesAPerturbedMetric) {
  auto r = run("report check --baseline " + p("q.json") + " " + p("q.json"));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos);
  r = run("report check --baseline " + p("q.json") + " " + p("q2.json"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL results.values.1.input_hex: \"0x1p-9\" vs baseline \"0x1p-10\""), std::string::npos) << r.out;
  r = run("report check --baseline " + p("q.json") + " " + p("edited.json"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("FAIL digest"), std::string::npos) << r.out;
}

TEST_F(ReportCli, CheckRefusesAnotherKindAndBadRules) {
  auto r = run("report check --baseline " + p("f.json") + " " + p("q.json"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("baseline is a formats report, the run a quantize report"), std::string::npos) << r.out;
  std::ofstream(dir_ / "rules.json") << R"({"rules": [{"path": "results.**", "mode": "sloppy"}]})";
  r = run("report check --rules " + p("rules.json") + " --baseline " + p("q.json") + " " + p("q.json"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("rules[0].mode: 'sloppy' is not one of"), std::string::npos) << r.out;
  std::ofstream(dir_ / "rules2.json") << R"({"rules": [{"path": "results.values.*.*", "mode": "ignore"}]})";
  EXPECT_EQ(run("report check --rules " + p("rules2.json") + " --baseline " + p("q.json") + " " + p("q2.json")).rc, 0);
}

TEST_F(ReportCli, EverySubcommandGivesAClearErrorOnBadFiles) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated.json", "truncated JSON"},
      {"garbage.json", "not JSON"},
      {"schema7.json", "schema 'precsim.report/7' is not supported"},
      {"banana.json", "unknown report kind 'banana'"},
      {"missing.json", "cannot open"}};
  const std::vector<std::string> commands = {"report summary {}", "report validate {}", "report diff {} " + p("q.json"),
                                             "report diff " + p("q.json") + " {}", "report check --baseline {} " + p("q.json"),
                                             "report check --baseline " + p("q.json") + " {}", "report export --csv " + p("csv") + " {}"};
  for (const auto& [file, message] : bad) {
    for (std::string c : commands) {
      c.replace(c.find("{}"), 2, p(file));
      const CliRun r = run(c);
      SCOPED_TRACE(c);
      EXPECT_EQ(r.rc, 2) << r.out;
      EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(file), std::string::npos) << r.out;
    }
  }
}

TEST_F(ReportCli, ValidateSummaryDiffExport) {
  auto r = run("report validate " + p("q.json") + " " + p("f.json"));
  EXPECT_EQ(r.rc, 0) << r.out;
  r = run("report validate " + p("edited.json"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("digest: stored"), std::string::npos) << r.out;
  r = run("report summary " + p("q.json"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("0x1p-10"), std::string::npos) << r.out;
  r = run("report diff " + p("q.json") + " " + p("q2.json"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("results.values.1.input_hex: 0x1p-10 -> 0x1p-9"), std::string::npos) << r.out;
  EXPECT_EQ(run("report diff " + p("q.json") + " " + p("q.json")).rc, 0);
  r = run("report export --csv " + p("csv_out") + " " + p("f.json"));
  EXPECT_EQ(r.rc, 0) << r.out;
  const std::string formats_csv = slurp(dir_ / "csv_out" / "formats.csv");
  EXPECT_NE(formats_csv.find("float8_e4m3fn"), std::string::npos);
}

}  // namespace

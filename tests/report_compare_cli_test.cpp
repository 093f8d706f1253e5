// `precsim report compare` and the train table of `report summary`, end to end through the CLI on
// a real three-seed train report and on copies of it with a constructed difference.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <set>

#include <nlohmann/json.hpp>

#include "../support/cli_run.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using precsim::test_support::CliRun;
CliRun run(const std::string& args) { return precsim::test_support::run_precsim(args); }

class ReportCompareCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("precsim_report_compare_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "cfg.json")
        << R"({"steps": 20, "batch": 32, "seeds": 3,
              "recipes": ["fp32", {"name": "fp32-again", "preset": "fp32"}, "fp8-delayed"]})";
    const auto r = run("train --config " + p("cfg.json") + " --deterministic --out " + p("t.json"));
    ASSERT_EQ(r.rc, 0) << r.out;
    std::ifstream in(dir_ / "t.json");
    doc_ = json::parse(in);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string p(const std::string& name) { return (dir_ / name).string(); }

  // A copy of the report in which fp32-again's heldout_loss is fp32's plus d[seed].
  static std::string with_difference(const std::string& name, const std::vector<double>& d) {
    json doc = doc_;
    auto& runs = doc["results"]["runs"];
    for (size_t s = 0; s < runs.size(); ++s) {
      const double a = runs[s]["variants"][0]["summary"]["heldout_loss"].get<double>();
      runs[s]["variants"][1]["summary"]["heldout_loss"] = a + d[s];
    }
    std::ofstream(dir_ / name) << doc.dump();
    return p(name);
  }
  static fs::path dir_;
  static json doc_;
};
fs::path ReportCompareCli::dir_;
json ReportCompareCli::doc_;

TEST_F(ReportCompareCli, TwoIdenticalRecipesAreIndistinguishable) {
  const auto r = run("report compare " + p("t.json") + " --a fp32 --b fp32-again");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("mean difference +0, 95% interval [+0, +0] over 3 seeds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: indistinguishable from seed noise"), std::string::npos) << r.out;
}

TEST_F(ReportCompareCli, AConstructedDifferenceIsFoundWithItsInterval) {
  // d = 0.010, 0.012, 0.014: mean 0.012, sd 0.002, half-width t(0.975, 2) 0.002 / sqrt(3).
  const auto r = run("report compare " + with_difference("d.json", {0.010, 0.012, 0.014}) + " --a fp32 --b fp32-again");
  ASSERT_EQ(r.rc, 1) << r.out;  // a difference fails a CI step
  const double half = 4.302652729749464 * 0.002 / std::sqrt(3.0);
  EXPECT_NE(r.out.find(fmt::format("mean difference {:+.4g}, 95% interval [{:+.4g}, {:+.4g}] over 3 seeds", 0.012,
                                   0.012 - half, 0.012 + half)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict: different: fp32-again is higher than fp32 in heldout_loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{:>+14.4g}", 0.014)), std::string::npos) << r.out;
}

TEST_F(ReportCompareCli, ADifferenceBelowTheChaosFloorIsNotCalledDifferent) {
  const auto& ref = doc_["results"]["runs"][0]["reference"]["series"];
  const double floor0 = std::fabs(ref["chaos_loss"].back().get<double>() - ref["loss"].back().get<double>());
  ASSERT_GT(floor0, 0);
  // Consistent across seeds (the interval excludes 0) but far below every seed's chaos floor.
  double least = floor0;
  for (const auto& run : doc_["results"]["runs"]) {
    const auto& s = run["reference"]["series"];
    least = std::min(least, std::fabs(s["chaos_loss"].back().get<double>() - s["loss"].back().get<double>()));
  }
  const double d = least / 100;
  const auto r = run("report compare " + with_difference("c.json", {d, 1.1 * d, 1.2 * d}) + " --a fp32 --b fp32-again");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: indistinguishable from the chaos floor"), std::string::npos) << r.out;
}

TEST_F(ReportCompareCli, Fp8DriftsFartherThanFp32InEverySeed) {
  const auto r = run("report compare " + p("t.json") + " --a fp32 --b fp8-delayed --metric weight_distance");
  ASSERT_EQ(r.rc, 1) << r.out;
  double lo = INFINITY;
  for (const auto& run : doc_["results"]["runs"])
    lo = std::min(lo, run["variants"][2]["summary"]["weight_distance"].get<double>() -
                          run["variants"][0]["summary"]["weight_distance"].get<double>());
  ASSERT_GT(lo, 0);
  EXPECT_NE(r.out.find("verdict: different: fp8-delayed is higher than fp32 in weight_distance"), std::string::npos)
      << r.out;
}

TEST_F(ReportCompareCli, JsonCarriesTheSameNumbersAndTheVerdictByName) {
  const auto r = run("report compare " + with_difference("j.json", {0.010, 0.012, 0.014}) + " --a fp32 --b fp32-again --json");
  ASSERT_EQ(r.rc, 1) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "different");
  EXPECT_EQ(j["a"], "fp32");
  EXPECT_EQ(j["metric"], "heldout_loss");
  ASSERT_EQ(j["diff"].size(), 3u);
  const double half = 4.302652729749464 * 0.002 / std::sqrt(3.0);
  EXPECT_NEAR(j["mean"].get<double>(), 0.012, 1e-12);
  EXPECT_NEAR(j["ci95"][0].get<double>(), 0.012 - half, 1e-12);
  EXPECT_NEAR(j["ci95"][1].get<double>(), 0.012 + half, 1e-12);
  for (size_t s = 0; s < 3; ++s)
    EXPECT_EQ(j["value_a"][s].get<double>(), doc_["results"]["runs"][s]["variants"][0]["summary"]["heldout_loss"].get<double>());
  // Identical recipes: indistinguishable, exit 0.
  const auto same = run("report compare " + p("t.json") + " --a fp32 --b fp32-again --json");
  ASSERT_EQ(same.rc, 0) << same.out;
  EXPECT_EQ(json::parse(same.out)["verdict"], "seed-noise") << same.out;
}

TEST_F(ReportCompareCli, OneSeedPrintsNoIntervalAndNoVerdict) {
  json doc = doc_;
  doc["results"]["runs"] = json::array({doc_["results"]["runs"][0]});
  std::ofstream(p("one.json")) << doc.dump();
  const auto r = run("report compare " + p("one.json") + " --a fp32 --b fp8-delayed");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto& v = doc_["results"]["runs"][0]["variants"];
  const double d = v[2]["summary"]["heldout_loss"].get<double>() - v[0]["summary"]["heldout_loss"].get<double>();
  EXPECT_NE(r.out.find(fmt::format("difference {:+.4g} (1 seed: no interval)", d)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("95% interval"), std::string::npos) << r.out;
  const auto j = run("report compare " + p("one.json") + " --a fp32 --b fp8-delayed --json");
  EXPECT_EQ(json::parse(j.out)["ci95"], nullptr) << j.out;
  EXPECT_EQ(json::parse(j.out)["verdict"], "one-seed") << j.out;
}

TEST_F(ReportCompareCli, BadVariantMetricOrKindIsRefusedNamingWhatIsAllowed) {
  auto r = run("report compare " + p("t.json") + " --a fp32 --b bf16");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("precsim: error: report compare"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no variant 'bf16' in the report; its variants: fp32, fp32-again, fp8-delayed"), std::string::npos)
      << r.out;
  r = run("report compare " + p("t.json") + " --a fp32 --b fp8-delayed --metric nope");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("no metric 'nope'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("heldout_loss"), std::string::npos) << r.out;
  ASSERT_EQ(run("quantize -f e4m3 1.5 --deterministic --out " + p("q.json")).rc, 0);
  r = run("report compare " + p("q.json") + " --a x --b y");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("a quantize report holds no per-seed runs"), std::string::npos) << r.out;
}

TEST_F(ReportCompareCli, AReportMissingPartsIsRefusedNotReadPastItsEnd) {
  json doc = doc_;
  doc["results"]["variants"][1].erase("summary");
  doc["results"]["runs"][2].erase("reference");
  std::ofstream(dir_ / "broken.json") << doc.dump();
  auto r = run("report summary " + p("broken.json"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("precsim: error: report summary"), std::string::npos) << r.out;
  r = run("report compare " + p("broken.json") + " --a fp32 --b fp8-delayed");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("not a train report's results"), std::string::npos) << r.out;
}

TEST_F(ReportCompareCli, SummaryPrintsTheVariantTableWithIntervalsAndDivergedAsACount) {
  const auto r = run("report summary " + p("t.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("variant "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("recipes.0."), std::string::npos) << "the configuration belongs to --full\n" << r.out;
  const auto& v = doc_["results"]["variants"][2];
  const auto& ci = v["summary_ci95"]["final_loss"];
  const std::string cell = fmt::format("{:.4g} ±{:.2g}", v["summary"]["final_loss"].get<double>(),
                                       (ci[1].get<double>() - ci[0].get<double>()) / 2);
  EXPECT_NE(r.out.find(cell), std::string::npos) << cell << "\n" << r.out;
  EXPECT_NE(r.out.find("(3 seeds;"), std::string::npos) << r.out;
  const auto full = run("report summary --full " + p("t.json"));
  EXPECT_NE(full.out.find("recipes.0.name = fp32"), std::string::npos) << full.out;
  // `diverged` counts the seeds that diverged: fp8-delayed made to diverge at step 12 in seed 2.
  json doc = doc_;
  doc["results"]["variants"][2]["summary"]["diverged_at"] = json::array({nullptr, 12, nullptr});
  std::ofstream(dir_ / "diverged.json") << doc.dump();
  const auto d = run("report summary " + p("diverged.json"));
  ASSERT_EQ(d.rc, 0) << d.out;
  std::istringstream lines(d.out);
  std::map<std::string, std::string> row;  // variant -> its row
  for (std::string line; std::getline(lines, line);) row[line.substr(0, line.find(' '))] = line;
  EXPECT_TRUE(row["fp8-delayed"].ends_with(" 1 of 3")) << d.out;
  EXPECT_TRUE(row["fp32"].ends_with(" -")) << d.out;
  EXPECT_TRUE(row["fp32-again"].ends_with(" -")) << d.out;
}

}  // namespace

namespace {

using Csv = std::vector<std::vector<std::string>>;
Csv read_csv(const fs::path& p) {
  Csv rows;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    rows.emplace_back();
    size_t at = 0;
    for (size_t comma; (comma = line.find(',', at)) != std::string::npos; at = comma + 1)
      rows.back().push_back(line.substr(at, comma - at));
    rows.back().push_back(line.substr(at));
  }
  return rows;
}

size_t column(const Csv& t, const std::string& name) {
  const auto it = std::find(t[0].begin(), t[0].end(), name);
  EXPECT_NE(it, t[0].end()) << name;
  return size_t(it - t[0].begin());
}

TEST_F(ReportCompareCli, ExportCsvIsTidyOneRowPerSeedVariantAndStep) {
  const auto r = run("report export --csv " + p("csv") + " " + p("t.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const Csv steps = read_csv(dir_ / "csv" / "train_steps.csv");
  const auto& runs = doc_["results"]["runs"];
  size_t expected = 0;
  for (const auto& run : runs)
    for (const auto& v : run["variants"]) {
      std::set<double> s;
      for (const char* group : {"series", "local", "evals"})
        for (const auto& x : v[group]["step"]) s.insert(x.get<double>());
      expected += s.size();
    }
  ASSERT_EQ(steps.size(), expected + 1);
  const size_t seed = column(steps, "seed"), variant = column(steps, "variant"), step = column(steps, "step"),
               loss = column(steps, "loss"), ref = column(steps, "reference.chaos_loss");
  // Seed 2, fp8-delayed, step 5: the report's own doubles, shortest round trip.
  const auto& v = runs[1]["variants"][2];
  size_t found = 0;
  for (const auto& row : steps) {
    for (const auto& cell : row) ASSERT_TRUE(cell.empty() || (cell[0] != '{' && cell[0] != '[')) << cell;
    if (row[seed] != "2" || row[variant] != "fp8-delayed" || row[step] != "5") continue;
    ++found;
    EXPECT_EQ(std::strtod(row[loss].c_str(), nullptr), v["series"]["loss"][5].get<double>());
    EXPECT_EQ(std::strtod(row[ref].c_str(), nullptr), runs[1]["reference"]["series"]["chaos_loss"][5].get<double>());
  }
  EXPECT_EQ(found, 1u);
  const Csv summary = read_csv(dir_ / "csv" / "train_summary.csv");
  EXPECT_EQ(summary.size(), 1 + runs.size() * (1 + doc_["results"]["variants"].size()));
  column(summary, "roles.gemm_in_dgrad.flushed_to_zero");
  const Csv variants = read_csv(dir_ / "csv" / "train_variants.csv");
  ASSERT_EQ(variants.size(), 4u);
  const auto& ci = doc_["results"]["variants"][2]["summary_ci95"]["heldout_loss"];
  EXPECT_EQ(std::strtod(variants[3][column(variants, "heldout_loss_ci95_lo")].c_str(), nullptr), ci[0].get<double>());
  EXPECT_EQ(variants[3][column(variants, "diverged_seeds")], "0");
}

}  // namespace

// One style across the command line, through the binary: every error starts "precsim: error:",
// unknown commands get "did you mean", -inf is a value, --quiet and --progress, and saved reports
// read back as the tables their commands printed, with array entries named rather than numbered.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;
using CliResult = test_support::CliSplitRun;

class CliStyle : public test_support::CliTempDirTest {
 protected:
  CliResult run(const std::string& args) const { return run_split(args); }
  void expect_error(const std::string& args, const std::string& what) const {
    const CliResult r = run(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("precsim: error: ")) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("Run with --help"), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
};

TEST_F(CliStyle, ErrorsStartAlikeAndSayWhatIsAllowed) {
  expect_error("analyse --dist normal --formats e4m3", "did you mean 'analyze'?");
  expect_error("quantise -f e4m3 1", "did you mean 'quantize'?");
  expect_error("frobnicate", "commands: formats, quantize, analyze");
  expect_error("", "give a command: formats, quantize");
  expect_error("quantize -f e4m3 --wat 1", "options of 'precsim quantize': --help, --format");
  expect_error("train --threads 0 --recipes fp32", "--threads");
  expect_error("analyze --dist normal --formats e4m3 --sort best", "allowed: qsnr, flushed, mse");
  expect_error("train --progress fancy --recipes fp32", "--progress");
  // A root option's value is not taken for the command.
  const CliResult ok = run("--threads 1 formats --json");
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// "-inf" is a value (CLI11 alone reads it as the options -i -n -f), in any case and in a list.
TEST_F(CliStyle, MinusInfinityIsAValue) {
  const CliResult r = run("quantize -f e5m2 --json -inf -INF 1");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto v = nlohmann::json::parse(r.out)["results"]["values"];
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0]["input"], "-inf");
  EXPECT_EQ(v[0]["code"], "0xfc");  // e5m2's -Inf
  EXPECT_EQ(v[1]["code"], "0xfc");
  EXPECT_EQ(v[2]["code"], "0x3c");
  const CliResult table = run("quantize -f e5m2 -inf");
  EXPECT_TRUE(table.out.find("\n-inf ") != std::string::npos) << table.out;
  const CliResult dot = run("dot --model fp32-seq --a 1,2 --b 1,1 --c -inf --json");
  ASSERT_EQ(dot.rc, 0) << dot.err;
  EXPECT_EQ(nlohmann::json::parse(dot.out)["results"]["result"], "-inf");
}

TEST_F(CliStyle, QuietAndProgressLines) {
  const std::string cfg = path("c.json");
  std::ofstream(cfg) << R"({"steps": 3, "batch": 16, "recipes": ["fp32"],
    "data": {"kind": "gaussian-mixture", "features": 4, "classes": 2, "train_size": 64, "heldout_size": 16},
    "model": {"hidden": [4]}})";
  // Outside a terminal: one line per seed's end (and every few seconds), with time and estimate.
  CliResult r = run("train --config '" + cfg + "' --out '" + path("r.json") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("seed 1/1 step 3/3 (100%)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("s elapsed, about 0 s left"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 1/3"), std::string::npos) << "a line per step: " << r.err;
  EXPECT_NE(r.err.find("wrote " + path("r.json")), std::string::npos) << r.err;
  // --quiet anywhere on the line: stderr is empty, the report is written all the same.
  for (const std::string& args : {"--quiet train --config '" + cfg + "' --out '" + path("q.json") + "'",
                                  "train -q --config '" + cfg + "' --out '" + path("q.json") + "'"}) {
    fs::remove(path("q.json"));
    r = run(args);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "") << args;
    EXPECT_TRUE(fs::exists(path("q.json"))) << args;
    EXPECT_NE(r.out.find("fp32"), std::string::npos) << "the table still goes to stdout";
  }
  r = run("train --config '" + cfg + "' --progress none");
  EXPECT_EQ(r.err.find("seed 1/1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was saved"), std::string::npos) << r.err;
  r = run("quantize -q -f mxfp4 --input '" + path("none.npy") + "'");
  EXPECT_EQ(r.rc, 2) << "errors still show under --quiet";
  EXPECT_TRUE(r.err.starts_with("precsim: error: --input")) << r.err;
}

// `report summary` prints what the command printed, for every kind: the report's header, then the
// command's stdout to the byte (not the configuration followed by a tree).
TEST_F(CliStyle, SavedReportsReadBackAsTheirTables) {
  std::vector<float> a(8 * 64), b(8 * 64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * std::ldexp(1.0f, int(i % 23) - 11);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i));
  write_npy(path("a.npy"), "<f4", {8, 64}, a.data(), a.size() * 4);
  write_npy(path("b.npy"), "<f4", {8, 64}, b.data(), b.size() * 4);
  const std::string data = R"("data": {"kind": "gaussian-mixture", "features": 4, "classes": 2, "train_size": 64, "heldout_size": 16},
    "model": {"hidden": [4]})";
  std::ofstream(path("c.json")) << R"({"steps": 3, "batch": 16, "recipes": ["fp32"], )" << data << "}";
  std::ofstream(path("sweep.json")) << R"({"base": {"steps": 3, "batch": 16, "recipes": ["fp32", "bf16-amp"], )" << data
                                     << R"(}, "grid": [{"path": "seed", "values": [1, 2]}]})";
  const std::string cfg = " --config '" + path("c.json") + "'";
  const std::vector<std::pair<std::string, std::string>> commands = {  // kind, command
      {"formats", "formats"},
      {"quantize", "quantize -f e4m3 448 464 -465 3.14159 0x1p-10 1e-3 0x1.8p-24 -inf -0 nan"},
      {"quantize", "quantize -f bf16 --input '" + path("a.npy") + "'"},
      {"quantize", "quantize -f nvfp4 --input '" + path("a.npy") + "'"},
      {"analyze", "analyze --input '" + path("a.npy") + "' --formats e4m3,mxfp4,nvfp4,fp8_e4m3:row"},
      {"dot", "dot --model h100 --a 1,2,0x1p-20 --b 1,1,1"},
      {"dot", "dot --model fp32-seq --a 0x1p100,1,-0x1p100 --b 1,1,1 --c 0.5"},
      {"gemm", "gemm --m 8 --n 8 --sweep-k 16,64 --model fp32-seq,h100"},
      {"allreduce", "allreduce -w 2,4 -n 512 -f bf16,fp16 -a ring,tree"},
      {"train", "train" + cfg + " --recipes fp32,bf16-amp --seeds 2"},
      {"attribute", "attribute" + cfg + " --recipe mxfp4"},
      {"search", "search" + cfg + " --formats e2m1,bf16 --budget 10"},
      {"sweep", "sweep '" + path("sweep.json") + "' --out-dir '" + path("sweep") + "'"}};
  for (const auto& [kind, c] : commands) {
    const std::string report = kind == "sweep" ? path("sweep") + "/sweep.json" : path("r.json");
    const CliResult printed = run(c + (kind == "sweep" ? "" : " --out '" + report + "'"));
    ASSERT_EQ(printed.rc, 0) << c << "\n" << printed.err;
    ASSERT_FALSE(printed.out.empty()) << c;
    const CliResult summary = run("report summary '" + report + "'");
    ASSERT_EQ(summary.rc, 0) << summary.err;
    ASSERT_TRUE(summary.out.ends_with(printed.out)) << c << "\n--- printed\n" << printed.out << "--- summary\n" << summary.out;
    // What comes before the table is the header: "<kind> report (complete)", tool, digest, run.
    const std::string header = summary.out.substr(0, summary.out.size() - printed.out.size());
    EXPECT_TRUE(header.starts_with(kind + " report (complete)")) << c << "\n" << header;
    EXPECT_LE(std::count(header.begin(), header.end(), '\n'), 5) << c << "\n" << header;
    EXPECT_EQ(header.find(" = "), std::string::npos) << "a configuration tree: " << c << "\n" << header;
  }
}

// A .safetensors file of float32 tensors (8-byte little-endian header length, JSON header, data).
void write_safetensors(const std::string& file, const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, v] : tensors) {
    header[name] = {{"dtype", "F32"}, {"shape", {v.size()}}, {"data_offsets", {offset, offset + v.size() * 4}}};
    offset += v.size() * 4;
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8).write(h.data(), static_cast<std::streamsize>(n));
  for (const auto& [name, v] : tensors) out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

// Several tensors: one table with a tensor column, ranked across the tensors by QSNR (as the
// report's ranking), by MSE with --sort mse, and --worst N: the N lowest QSNR, worst first.
TEST_F(CliStyle, AnalyzeRanksAcrossTensors) {
  std::vector<float> wide(256), narrow(256);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = std::ldexp(std::sin(0.7f * float(i)), int(i % 19) - 9);
  for (size_t i = 0; i < narrow.size(); ++i) narrow[i] = 1.0f + 0.01f * std::cos(0.3f * float(i));
  write_safetensors(path("m.safetensors"), {{"wide", wide}, {"narrow", narrow}});
  const std::string base = "analyze --input '" + path("m.safetensors") + "' --formats e4m3,mxfp4,nvfp4,bf16";
  const auto doc = nlohmann::json::parse(run(base + " --json").out);
  struct Entry { std::string tensor, scheme; double qsnr, mse; };
  std::vector<Entry> all;
  for (const auto& t : doc["results"]["tensors"])
    for (const auto& s : t["schemes"]) all.push_back({t["name"], s["scheme"], read_number(s["qsnr_db"]), read_number(s["mse"])});
  ASSERT_EQ(all.size(), 8u);
  // The table's rows (tensor, scheme) in order.
  auto rows = [&](const std::string& args) {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(run(args).out);
    std::string line, t, s;
    std::getline(in, line);
    EXPECT_TRUE(line.starts_with("tensor ")) << line;
    while (in >> t >> s && std::getline(in, line)) out.emplace_back(t, s);
    return out;
  };
  auto order = [&](auto better) {
    std::vector<Entry> e = all;
    std::stable_sort(e.begin(), e.end(), better);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& x : e) out.emplace_back(x.tensor, x.scheme);
    return out;
  };
  // NaN (e4m3 overflows on the wide tensor: its QSNR is nan) ranks last.
  const auto nan_last = [](double a, double b, bool higher) {
    return std::isnan(a) || std::isnan(b) ? !std::isnan(a) && std::isnan(b) : higher ? a > b : a < b;
  };
  const auto by_qsnr = order([&](const Entry& x, const Entry& y) { return nan_last(x.qsnr, y.qsnr, true); });
  EXPECT_EQ(rows(base), by_qsnr);
  for (size_t i = 0; i < by_qsnr.size(); ++i) {
    EXPECT_EQ(doc["results"]["ranking"][i]["tensor"], by_qsnr[i].first);
    EXPECT_EQ(doc["results"]["ranking"][i]["scheme"], by_qsnr[i].second);
  }
  EXPECT_NE(by_qsnr[0].first, by_qsnr[1].first) << "the ranking crosses the tensors";
  EXPECT_EQ(rows(base + " --sort mse"), order([&](const Entry& x, const Entry& y) { return nan_last(x.mse, y.mse, false); }));
  const auto worst = rows(base + " --worst 3");
  ASSERT_EQ(worst.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(worst[i], by_qsnr[by_qsnr.size() - 1 - i]) << i;
}

TEST_F(CliStyle, CheckNamesVariantsAndWritesJunit) {
  const std::string cfg = path("c.json");
  std::ofstream(cfg) << R"({"steps": 4, "batch": 16, "recipes": ["fp32", "bf16-amp"],
    "data": {"kind": "gaussian-mixture", "features": 4, "classes": 2, "train_size": 64, "heldout_size": 16},
    "model": {"hidden": [4]}})";
  ASSERT_EQ(run("train -q --config '" + cfg + "' --deterministic --out '" + path("base.json") + "'").rc, 0);
  // The same run with one variant's result changed by hand (the digest is recomputed by check).
  nlohmann::json run_doc = nlohmann::json::parse(test_support::slurp(path("base.json")));
  auto& bf16 = run_doc["results"]["variants"][1];
  ASSERT_EQ(bf16["name"], "bf16-amp");
  bf16["summary"]["heldout_loss"] = bf16["summary"]["heldout_loss"].get<double>() * 1.5;
  run_doc["results_digest"] = results_digest(run_doc["results"]);
  std::ofstream(path("run.json")) << run_doc.dump();
  const CliResult check = run("report check --baseline '" + path("base.json") + "' '" + path("run.json") +
                              "' --junit '" + path("check.xml") + "'");
  ASSERT_EQ(check.rc, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("FAIL results.variants[bf16-amp].summary.heldout_loss"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("variants.1."), std::string::npos) << check.out;
  const std::string xml = test_support::slurp(path("check.xml"));
  EXPECT_NE(xml.find("<testsuite name=\"precsim report check"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase classname=\"precsim.report.check\" name=\"results.variants[bf16-amp].summary.heldout_loss\"><failure"),
            std::string::npos) << xml;
  EXPECT_NE(xml.find("failures=\""), std::string::npos) << xml;
  const CliResult diff = run("report diff '" + path("base.json") + "' '" + path("run.json") + "'");
  EXPECT_EQ(diff.rc, 1);
  EXPECT_NE(diff.out.find("results.variants[bf16-amp].summary.heldout_loss"), std::string::npos) << diff.out;
}

}  // namespace
}  // namespace precsim

// `precsim analyze` as a user runs it: the binary at PRECSIM_CLI on generated tensors, .npy and
// .safetensors fixtures written here, and every kind of bad input (exit 2, one clear message,
// nothing written).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/cli_run.h"
#include "precsim/formats/block_scaling.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/data/distributions.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

using test_support::slurp;
using CliResult = test_support::CliSplitRun;

class AnalyzeCli : public test_support::CliTempDirTest {
 protected:
  CliResult run(const std::string& args, const std::string& env = "") const {
    return run_split("analyze " + args, env);
  }
  void expect_usage_error(const std::string& args, const std::string& needle) const {
    const fs::path out = dir_ / "report.json";
    const CliResult r = run(args + " --out '" + out.string() + "'");
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
};

// A safetensors file with the given F32 tensors (name, shape, values) and optional raw edits.
std::string safetensors_bytes(const std::vector<std::tuple<std::string, std::vector<size_t>, std::vector<float>>>& ts,
                              const std::string& dtype_override = "") {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& [name, shape, v] : ts) {
    const size_t b = data.size();
    data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    h[name] = {{"dtype", dtype_override.empty() ? "F32" : dtype_override}, {"shape", shape}, {"data_offsets", {b, data.size()}}};
  }
  const std::string text = h.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  return out + text + data;
}

// A user who writes an MX or NVFP4 element with a custom spelling ("e4m3:nanonly" is float8_e4m3fn)
// gets the preset's scheme: the same numbers, under the name written.
TEST_F(AnalyzeCli, CustomSpellingOfAnMxElementGivesThePresetsNumbers) {
  const CliResult r = run("--dist normal --count 8192 --seed 5 --formats "
                          "mxfp8_e4m3,e4m3:nanonly:mx,mxfp4:rule=rceil,e2m1:finite:mx:rule=rceil,nvfp4,e2m1:finite:nvfp4 "
                          "--json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const auto& schemes = report["results"]["tensors"][0]["schemes"];
  ASSERT_EQ(schemes.size(), 6u);
  for (size_t i = 0; i < 6; i += 2) {
    nlohmann::json preset = schemes[i], custom = schemes[i + 1];
    EXPECT_NE(preset["scheme"], custom["scheme"]);
    for (auto* s : {&preset, &custom}) {
      s->erase("scheme");
      (*s)["description"].erase("name");
      (*s)["description"]["element"].erase("name");  // the element's encoding is compared, not its spelling
    }
    EXPECT_EQ(preset, custom) << schemes[i + 1]["scheme"];
  }
  expect_usage_error("--dist normal --formats e4m3:ieee:mx", "is not an MX element");
}

TEST_F(AnalyzeCli, GeneratedDistributionReportAndRanking) {
  const CliResult r = run("--dist normal --count 65536 --seed 3 --formats e4m3,mxfp8_e4m3,mxfp4:rule=rceil,nvfp4 "
                          "--json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "analyze");
  const auto& t = j["results"]["tensors"][0];
  EXPECT_EQ(t["count"], 65536);
  ASSERT_EQ(t["schemes"].size(), 4u);
  // Each scheme is named exactly as given and described in full.
  EXPECT_EQ(t["schemes"][2]["scheme"], "mxfp4:rule=rceil");
  EXPECT_EQ(t["schemes"][2]["description"]["rule"], "rceil");
  EXPECT_EQ(t["schemes"][2]["clipped_blocks"], 0);
  EXPECT_EQ(t["schemes"][1]["bits_per_element"], 8.25);
  EXPECT_EQ(t["schemes"][1]["blocks"], 65536 / 32);
  EXPECT_EQ(t["schemes"][0]["window"]["max_log2"].get<double>(), std::log2(448.0));
  EXPECT_EQ(t["schemes"][0]["window"]["min_exp"], -9);
  EXPECT_EQ(t["schemes"][0]["window"]["max_exp"], 8);
  // The same numbers as the library on the same generated data.
  Distribution d = parse_distribution("normal");
  std::vector<float> x(65536), q(65536);
  generate(d, x, 3);
  block_fake_quantize(parse_block_scaling("mxfp8_e4m3"), x, q, 16, 4096);
  EXPECT_EQ(t["schemes"][1]["qsnr_db"].get<double>(), error_stats(x, q).qsnr_db);
  // The input's exponent histogram counts every non-zero value.
  uint64_t total = 0;
  int last = -1000;
  for (const auto& bin : t["exponent_histogram"]) {
    EXPECT_GT(bin["exponent"].get<int>(), last);
    last = bin["exponent"].get<int>();
    total += bin["count"].get<uint64_t>();
  }
  EXPECT_EQ(total + t["zeros"].get<uint64_t>(), 65536u);
  // Ranking by QSNR, best first: e4m3 (about 31.5 dB) leads, mxfp4 trails.
  const auto& rank = j["results"]["ranking"];
  for (size_t i = 1; i < rank.size(); ++i)
    EXPECT_GE(rank[i - 1]["qsnr_db"].get<double>(), rank[i]["qsnr_db"].get<double>());
  EXPECT_EQ(rank[0]["scheme"], "e4m3");
  EXPECT_NEAR(rank[0]["qsnr_db"].get<double>(), 31.52, 0.3);
  // Deterministic: the same report on 1 and 2 threads.
  const CliResult r1 = run("--dist normal --count 65536 --seed 3 --formats e4m3,mxfp8_e4m3,mxfp4:rule=rceil,nvfp4 "
                           "--json --deterministic", "OMP_NUM_THREADS=1");
  EXPECT_EQ(r1.out, r.out);
}

TEST_F(AnalyzeCli, TextTableAndOutliers) {
  const CliResult r = run("--dist student-t:df=3 --outliers 0.001,1000 --count 8192 --formats mxfp4,fp8_e4m3:tensor,bf16");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("QSNR dB"), std::string::npos);
  const size_t bf = r.out.find("bf16"), fp8 = r.out.find("fp8_e4m3:tensor"), mx = r.out.find("mxfp4");
  ASSERT_NE(bf, std::string::npos);
  EXPECT_LT(bf, fp8);  // ranked: bf16 first
  EXPECT_LT(fp8, mx);
}

TEST_F(AnalyzeCli, NpyInputWithNanAndInfIsCountedNotFatal) {
  std::vector<float> v = {1.0f, NAN, -2.5f, INFINITY, 0.0f, 3.0f};
  write_npy(path("a.npy"), "<f4", {2, 3}, v.data(), v.size() * 4);
  const CliResult r = run("--input '" + path("a.npy") + "' --formats mxfp8_e4m3:block=3,e5m2 --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto t = nlohmann::json::parse(r.out)["results"]["tensors"][0];
  EXPECT_EQ(t["nonfinite"], 2);
  EXPECT_EQ(t["zeros"], 1);
  EXPECT_EQ(t["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(t["schemes"][0]["nonfinite_blocks"], 2);   // rows {1,NaN,-2.5} and {Inf,0,3}
  EXPECT_EQ(t["schemes"][1]["qsnr_db"], "inf");        // the finite values are exact in e5m2
  // float64 and integer arrays are read too.
  std::vector<int16_t> iv = {1, -300, 7};
  write_npy(path("i.npy"), "<i2", {3}, iv.data(), 6);
  EXPECT_EQ(run("--input '" + path("i.npy") + "' --formats e4m3 --json").rc, 0);
}

TEST_F(AnalyzeCli, SafetensorsSelectionByNameAndGlob) {
  std::vector<float> a(64), b(32), c(16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i)) * 100;
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i);
  std::ofstream(path("m.safetensors"), std::ios::binary)
      << safetensors_bytes({{"layer.0.w", {8, 8}, a}, {"layer.1.w", {4, 8}, b}, {"head", {16}, c}});
  CliResult r = run("--input '" + path("m.safetensors") + "' --formats mxfp4 --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["results"]["tensors"].size(), 3u);
  r = run("--input '" + path("m.safetensors") + "' --tensor 'layer.*' --formats mxfp4 --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"]["tensors"].size(), 2u);
  EXPECT_EQ(j["results"]["tensors"][1]["name"], "layer.1.w");
  EXPECT_EQ(j["results"]["tensors"][1]["rows"], 4);
  EXPECT_NE(r.err.find("[2/2] layer.1.w"), std::string::npos);  // progress on stderr
  // --out writes the same report atomically.
  r = run("--input '" + path("m.safetensors") + "' --tensor head --formats e2m1 --out '" + path("r.json") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("r.json")))["results"]["tensors"][0]["name"], "head");
}

// Token ids and an all-zero buffer are not ranked with the weights: a QSNR of inf for a zero
// tensor, or of an integer tensor no recipe quantizes, would only push the weights down the list.
// The export gives one row per tensor and scheme, with the metrics as columns.
TEST_F(AnalyzeCli, IntegerAndAllZeroTensorsAreNotRankedAndExportIsTidy) {
  std::vector<float> w(64), zeros(32, 0.0f), ids(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i * 7);
    std::memcpy(&ids[i], &id, 4);
  }
  std::string bytes = safetensors_bytes({{"w", {8, 8}, w}, {"zeros", {4, 8}, zeros}, {"ids", {1, 16}, ids}});
  const std::string last = "\"ids\":{\"data_offsets\":[384,448],\"dtype\":\"F32\"";
  const size_t at = bytes.find(last);
  ASSERT_NE(at, std::string::npos) << bytes.substr(8, 200);
  bytes.replace(at + last.size() - 4, 3, "I32");
  std::ofstream(path("m.safetensors"), std::ios::binary) << bytes;
  const CliResult r = run("--input '" + path("m.safetensors") + "' --formats mxfp4,bf16 --out '" + path("r.json") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto res = nlohmann::json::parse(slurp(path("r.json")))["results"];
  ASSERT_EQ(res["ranking"].size(), 2u);
  for (const auto& row : res["ranking"]) EXPECT_EQ(row["tensor"], "w");
  EXPECT_EQ(res["unranked"], nlohmann::json::parse(R"([
    {"tensor": "zeros", "reason": "all 32 values are 0: exact under every scheme"},
    {"tensor": "ids", "reason": "integer dtype I32: not quantized by a recipe"}])"));
  EXPECT_EQ(res["tensors"][2]["dtype"], "I32");
  EXPECT_NE(r.out.find("not ranked: ids (integer dtype I32"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ids    "), std::string::npos) << r.out;  // no table row for it
  EXPECT_EQ(run_split("report validate '" + path("r.json") + "'").rc, 0);
  ASSERT_EQ(run_split("report export --csv '" + path("csv") + "' '" + path("r.json") + "'").rc, 0);
  std::istringstream csv(slurp(path("csv/analyze_schemes.csv")));
  std::string header, line;
  std::getline(csv, header);
  size_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 3u * 2u);
  EXPECT_EQ(header.rfind("tensor,", 0), 0u) << header;
  EXPECT_NE(header.find(",qsnr_db,"), std::string::npos) << header;
  EXPECT_LT(std::count(header.begin(), header.end(), ','), 30) << header;
  EXPECT_NE(slurp(path("csv/analyze_exponents.csv")).find("tensor,exponent,count\nw,"), std::string::npos);
}

TEST_F(AnalyzeCli, BadInputsExitTwoWithOneClearMessage) {
  std::vector<float> a(16, 1.0f);
  std::ofstream(path("m.safetensors"), std::ios::binary) << safetensors_bytes({{"w", {4, 4}, a}, {"e", {0}, {}}});
  const std::string st = "--input '" + path("m.safetensors") + "' ";
  expect_usage_error(st + "--tensor nope --formats e4m3", "available: ");
  expect_usage_error(st + "--tensor e --formats e4m3", "'e' is empty");
  expect_usage_error(st + "--tensor w --formats mxfp9", "mxfp9");
  expect_usage_error(st + "--tensor w --formats mxfp4:rule=round", "floor, ceil, even, rceil");
  // A header that lies about the offsets, and a truncated file.
  std::string lying = safetensors_bytes({{"w", {4, 4}, a}});
  std::ofstream(path("t.safetensors"), std::ios::binary) << lying.substr(0, lying.size() - 8);
  expect_usage_error("--input '" + path("t.safetensors") + "' --formats e4m3", "run past the data section");
  std::ofstream(path("l.safetensors"), std::ios::binary) << safetensors_bytes({{"w", {5, 4}, a}});
  expect_usage_error("--input '" + path("l.safetensors") + "' --formats e4m3", "needs 80");
  std::ofstream(path("c.safetensors"), std::ios::binary) << safetensors_bytes({{"w", {2}, {0, 0}}}, "C64");
  expect_usage_error("--input '" + path("c.safetensors") + "' --formats e4m3", "C64");
  // .npy: corrupt header, unsupported dtype, empty array, missing file.
  std::ofstream(path("bad.npy"), std::ios::binary) << "\x93NUMPY\x01\x00garbage";
  expect_usage_error("--input '" + path("bad.npy") + "' --formats e4m3", "bad.npy");
  std::vector<float> cplx(4, 0.0f);
  write_npy(path("c.npy"), "<c8", {2}, cplx.data(), 16);
  expect_usage_error("--input '" + path("c.npy") + "' --formats e4m3", "<c8");
  write_npy(path("e.npy"), "<f4", {0}, nullptr, 0);
  expect_usage_error("--input '" + path("e.npy") + "' --formats e4m3", "empty");
  expect_usage_error("--input '" + path("missing.npy") + "' --formats e4m3", "missing.npy");
  // Generated input: unknown names and parameters, bad outliers, zero count, conflicts.
  expect_usage_error("--dist cauchy --formats e4m3", "normal[:mean=M,std=S]");
  expect_usage_error("--dist normal:sd=2 --formats e4m3", "'sd=2' is not a parameter");
  expect_usage_error("--dist normal --outliers 2,10 --formats e4m3", "outside [0, 1]");
  expect_usage_error("--dist normal --count 0 --formats e4m3", "--count 0");
  expect_usage_error("--dist normal --input '" + path("m.safetensors") + "' --formats e4m3", "not both");
  // An unwritable --out fails before the work starts.
  const CliResult r = run("--dist normal --count 16 --formats e4m3 --out /nonexistent/dir/r.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("/nonexistent/dir/r.json"), std::string::npos);
}

}  // namespace
}  // namespace precsim

// `precsim formats` and `precsim quantize` as a user runs them: the binary at PRECSIM_CLI, its
// stdout, stderr, exit code and files. Expected values come from the specs, not from the binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

using test_support::slurp;
using CliResult = test_support::CliSplitRun;

class QuantizeCli : public test_support::CliTempDirTest {
 protected:
  CliResult run(const std::string& args) const { return run_split(args); }
  // Exit code 2, a message naming `what`, and no output file left behind.
  void expect_usage_error(const std::string& args, const std::string& what, const std::vector<std::string>& outputs = {}) {
    const CliResult r = run(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\nstderr: " << r.err;
    for (const auto& o : outputs) EXPECT_FALSE(fs::exists(o)) << o << " left behind by: " << args;
    // No temporary file of an atomic write either.
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string n = e.path().filename().string();
      EXPECT_TRUE(n == "stderr.txt" || n.ends_with(".npy") || n.ends_with(".bin")) << "stray file " << n << " after: " << args;
    }
  }
};

TEST_F(QuantizeCli, FormatsJsonListsEveryPreset) {
  const CliResult r = run("formats --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("kind"), "formats");
  std::set<std::string> names;
  for (const auto& row : j.at("results").at("formats")) names.insert(row.at("name").get<std::string>());
  for (const auto& p : format_presets()) EXPECT_TRUE(names.count(p.format.name)) << p.format.name;
  EXPECT_EQ(names.size(), format_presets().size());
  for (const auto& row : j.at("results").at("formats")) {
    if (row.at("name") == "float8_e4m3fn") {
      EXPECT_EQ(row.at("max_finite"), 448.0);
      EXPECT_EQ(row.at("min_subnormal"), 0x1p-9);
      EXPECT_EQ(row.at("finite_values"), 253);
    }
    if (row.at("name") == "float4_e2m1fn") {
      EXPECT_EQ(row.at("max_finite"), 6.0);
    }
  }
  const CliResult table = run("formats");
  EXPECT_EQ(table.rc, 0);
  EXPECT_NE(table.out.find("float8_e5m2"), std::string::npos);
}

TEST_F(QuantizeCli, ValuesJsonGivesCodesValuesAndStatus) {
  const CliResult r = run("quantize -f e4m3 --json 448 464 465 -465 -0 0x1p-10 3.14159265358979");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("kind"), "quantize");
  EXPECT_EQ(j.at("config").at("format").at("name"), "float8_e4m3fn");
  EXPECT_EQ(j.at("config").at("options").at("rounding"), "nearest-even");
  const auto& v = j.at("results").at("values");
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[0].at("code"), "0x7e");
  EXPECT_EQ(v[0].at("status"), "exact");
  EXPECT_EQ(v[1].at("code"), "0x7e");  // the tie at 464 goes to the even 448
  EXPECT_EQ(v[1].at("value"), 448.0);
  EXPECT_EQ(v[2].at("code"), "0x7f");
  EXPECT_EQ(v[2].at("value"), "nan");
  EXPECT_EQ(v[3].at("code"), "0xff");
  EXPECT_EQ(v[4].at("code"), "0x80");
  EXPECT_EQ(v[5].at("code"), "0x00");
  EXPECT_EQ(v[5].at("status"), "inexact|underflow");
  EXPECT_EQ(v[6].at("value"), 3.25);
  EXPECT_EQ(v[6].at("value_hex"), "0x1.ap+1");
}

TEST_F(QuantizeCli, ValuesTableAndOptions) {
  const CliResult r = run("quantize -f e5m2 --overflow saturate 61440 -1e9");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("57344"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-57344"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saturated"), std::string::npos) << r.out;
  // Negative values need no `--`; `--` before the first value works too.
  EXPECT_EQ(run("quantize -f e4m3 -465 -0").rc, 0);
  const CliResult dd = run("quantize -f e4m3 --json -- -0 -1.5");
  ASSERT_EQ(dd.rc, 0) << dd.err;
  EXPECT_EQ(nlohmann::json::parse(dd.out).at("results").at("values")[1].at("code"), "0xbc");
  const CliResult st = run("quantize -f e5m2 --rounding stochastic --sr-bits 3 --seed 5 --json 259 259 259 259");
  ASSERT_EQ(st.rc, 0) << st.err;
  // The parsed document is kept: a range-for over a member of a temporary reads freed memory.
  const nlohmann::json sr = nlohmann::json::parse(st.out);
  for (const auto& row : sr.at("results").at("values"))
    EXPECT_EQ(row.at("value"), 256.0);  // P(up) = floor(3/64 * 8) / 8 = 0
}

TEST_F(QuantizeCli, OutWritesTheReportAtomically) {
  const std::string out = path("report.json");
  const CliResult r = run("quantize -f bf16 --out '" + out + "' --deterministic 1.1");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j.at("results").at("values")[0].at("value"), 1.1015625);
  EXPECT_FALSE(j.contains("environment"));
  const CliResult again = run("quantize -f bf16 --json --deterministic 1.1");
  EXPECT_EQ(nlohmann::json::parse(again.out), j);
}

TEST_F(QuantizeCli, NpyArraysInValuesAndCodesOut) {
  std::vector<float> xf{1.0f, 464.0f, -465.0f, 0.001f, 3.3f, -0.0f, 1e-9f, 250.0f};
  std::vector<double> xd(xf.begin(), xf.end());
  xd.push_back(0x1.0000000001p0);  // not a float: the float64 path keeps it
  write_npy(path("f32.npy"), "<f4", {2, 4}, xf.data(), xf.size() * 4);
  write_npy(path("f64.npy"), "<f8", {xd.size()}, xd.data(), xd.size() * 8);
  const Format e4m3 = format_by_name("e4m3");

  CliResult r = run("quantize -f e4m3 --input '" + path("f32.npy") + "' --output '" + path("q32.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  NpyArray q = read_npy(path("q32.npy"));
  EXPECT_EQ(q.descr, "<f4");
  EXPECT_EQ(q.shape, (std::vector<size_t>{2, 4}));
  const float want32[] = {1.0f, 448.0f, NAN, 0.001953125f, 3.25f, -0.0f, 0.0f, 256.0f};
  for (size_t i = 0; i < xf.size(); ++i) {
    const float g = q.as<float>()[i];
    if (std::isnan(want32[i])) {
      EXPECT_TRUE(std::isnan(g)) << i;
    } else {
      EXPECT_EQ(g, want32[i]) << i;
      EXPECT_EQ(std::signbit(g), std::signbit(want32[i])) << i;
    }
  }
  EXPECT_NE(r.out.find("8 elements"), std::string::npos) << r.out;

  r = run("quantize -f fp32 --input '" + path("f64.npy") + "' --output '" + path("q64.npy") + "' --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  q = read_npy(path("q64.npy"));
  EXPECT_EQ(q.descr, "<f8");
  EXPECT_EQ(q.as<double>()[8], 1.0);
  EXPECT_EQ(nlohmann::json::parse(r.out).at("results").at("stats").at("count"), 9);

  r = run("quantize -f e4m3 --codes --input '" + path("f32.npy") + "' --output '" + path("c.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  q = read_npy(path("c.npy"));
  EXPECT_EQ(q.descr, "|u1");
  const uint8_t want_codes[] = {0x38, 0x7e, 0xff, 0x01, 0x45, 0x80, 0x00, 0x78};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(q.as<uint8_t>()[i], want_codes[i]) << i;

  r = run("quantize -f fp16 --codes --input '" + path("f32.npy") + "' --output '" + path("h.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  q = read_npy(path("h.npy"));
  EXPECT_EQ(q.descr, "<u2");
  EXPECT_EQ(q.as<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(q.as<uint16_t>()[1], 0x5f40);
  (void)e4m3;
}

TEST_F(QuantizeCli, CodeArraysInIncludingMlDtypesVoidAndF1Items) {
  // e5m2 codes of 1.5, 320, -2, NaN as ml_dtypes saves them: '<V1' items (and '<f1' for e5m2).
  const uint8_t codes[] = {0x3e, 0x5d, 0xc0, 0x7f};
  for (const char* descr : {"|u1", "<V1", "<f1"}) {
    SCOPED_TRACE(descr);
    write_npy(path("codes.npy"), descr, {4}, codes, 4);
    const CliResult r = run("quantize -f e2m1 --input '" + path("codes.npy") + "' --input-format e5m2 --output '" +
                      path("v.npy") + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    const NpyArray v = read_npy(path("v.npy"));
    EXPECT_EQ(v.as<float>()[0], 1.5f);
    EXPECT_EQ(v.as<float>()[1], 6.0f);  // FP4 saturates
    EXPECT_EQ(v.as<float>()[2], -2.0f);
    EXPECT_EQ(v.as<float>()[3], 6.0f);  // NaN -> +max, as CUDA
  }
  const uint16_t bf[] = {0x3fc0, 0xc2c8};  // bf16 1.5, -100 as ml_dtypes '<V2'
  write_npy(path("bf.npy"), "<V2", {2}, bf, 4);
  const CliResult r = run("quantize -f int8 --input '" + path("bf.npy") + "' --input-format bf16 --codes --output '" +
                    path("i.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const NpyArray i8 = read_npy(path("i.npy"));
  EXPECT_EQ(i8.as<uint8_t>()[0], 2);     // 1.5 ties to even 2
  EXPECT_EQ(i8.as<uint8_t>()[1], 0x9c);  // -100
}

TEST_F(QuantizeCli, BadInputExitsTwoWithAClearMessageAndNoOutput) {
  const std::string out = path("out.npy"), rep = path("rep.json");
  std::vector<float> xs{1, 2, 3};
  write_npy(path("ok.npy"), "<f4", {3}, xs.data(), 12);
  const std::string good = slurp(path("ok.npy"));
  std::ofstream(path("truncated.npy"), std::ios::binary) << good.substr(0, good.size() - 5);
  std::ofstream(path("header.npy"), std::ios::binary) << good.substr(0, 20);
  std::ofstream(path("garbage.npy"), std::ios::binary) << "this is not numpy";
  std::vector<int16_t> ints{1, 2};
  write_npy(path("i2.npy"), "<i2", {2}, ints.data(), 4);
  const std::string io = " --output '" + out + "' --out '" + rep + "'";

  expect_usage_error("quantize -f e4m3x 1", "float8_e5m2");  // lists the known formats
  expect_usage_error("quantize -f e4m3x 1", "'e4m3x'");
  expect_usage_error("quantize -f e12m3 1", "1..11");
  expect_usage_error("quantize -f e4m3:wat 1", "wat");
  expect_usage_error("quantize -f e5m0 1", "nanonly");
  expect_usage_error("quantize -f e4m3 --sr-bits 0 1", "1..32");
  expect_usage_error("quantize -f e4m3 --sr-bits 33 1", "1..32");
  expect_usage_error("quantize -f e4m3 --rounding nearest 1", "nearest-even, nearest-away");
  expect_usage_error("quantize -f e4m3 --overflow clamp 1", "ieee, saturate");
  expect_usage_error("quantize -f e4m3 abc", "abc");
  expect_usage_error("quantize -f e4m3 --input '" + path("missing.npy") + "'" + io, "missing.npy", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("truncated.npy") + "'" + io, "truncated", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("header.npy") + "'" + io, "truncated", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("garbage.npy") + "'" + io, "not a .npy", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("i2.npy") + "'" + io, "<i2", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("ok.npy") + "' --input-format bf16" + io, "bf16", {out, rep});
  expect_usage_error("quantize -f e4m3 --input '" + path("ok.npy") + "' --output /nonexistent/dir/x.npy", "--output");
  expect_usage_error("quantize -f e4m3 1 --out /nonexistent/dir/r.json", "--out");
  expect_usage_error("quantize -f e4m3", "nothing to quantize");
  expect_usage_error("quantize -f e4m3 1 --input '" + path("ok.npy") + "'", "not both");
  expect_usage_error("quantize 1", "--format");
  expect_usage_error("--bogus", "--bogus");  // named, though no command was given either
  expect_usage_error("--bogus formats", "--bogus");
  expect_usage_error("quantize --bogus -f e4m3 1", "--bogus");
  expect_usage_error("formats --bogus", "--bogus");
}

}  // namespace
}  // namespace precsim

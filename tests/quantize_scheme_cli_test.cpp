// `precsim quantize -f SCHEME --input x.npy`: every kind of block scaling analyze knows, through
// the CLI. The expected arrays come from the library's scalar references (block_fake_quantize_reference,
// block_quantize_reference), not from the fused path the command uses; the statistics from
// `precsim analyze` on the same file and from a QSNR summed here in long double.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/formats/block_scaling.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"

namespace precsim {
namespace {

using CliResult = test_support::CliSplitRun;

// Every kind of scheme: MX with each rule and element (and down the columns), MXINT8, NVFP4 (1-D
// and 16x16), FP8 per tensor, row, 1x128 tile and 128x128 block (one with power-of-two scales).
const char* const kSchemes[] = {"mxfp8_e4m3",       "mxfp8_e5m2:rule=rceil", "mxfp6_e2m3:rule=ceil", "mxfp6_e3m2",
                                "mxfp4:rule=even",  "mxfp4:axis=0",          "mxint8",               "nvfp4",
                                "nvfp4:2d",         "fp8_e4m3:tensor",       "fp8_e5m2:row",         "fp8_e4m3:tile128",
                                "fp8_e4m3:block128:pow2"};
constexpr size_t kRows = 6, kCols = 150;  // partial blocks along and across for every block size

class QuantizeSchemeCli : public test_support::CliTempDirTest {
 protected:
  void SetUp() override {
    CliTempDirTest::SetUp();
    // Normal values over 30 binades, with zeros and tiny values: every block has its own scale.
    std::mt19937_64 gen(11);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> binade(-20, 10);
    x_.resize(kRows * kCols);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = i % 37 == 0 ? 0.0f : std::ldexp(normal(gen), binade(gen));
    write_npy(path("x.npy"), "<f4", {kRows, kCols}, x_.data(), x_.size() * sizeof(float));
  }
  std::string x() const { return "'" + path("x.npy") + "'"; }
  nlohmann::json run_json(const std::string& args) const {
    const CliResult r = run_split(args + " --json --deterministic");
    EXPECT_EQ(r.rc, 0) << args << "\n" << r.err;
    return r.rc == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }
  static std::vector<float> floats(const NpyArray& a) {
    std::vector<float> v(a.count());
    std::memcpy(v.data(), a.data.data(), v.size() * sizeof(float));
    return v;
  }
  std::vector<float> x_;
};

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    if (g != w && !(std::isnan(got[i]) && std::isnan(want[i])) && bad++ < 3)
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST_F(QuantizeSchemeCli, ValuesEqualTheLibraryAndAnalyzesStatistics) {
  for (const char* scheme : kSchemes) {
    SCOPED_TRACE(scheme);
    const std::string out = path("y.npy");
    const nlohmann::json q = run_json(std::string("quantize -f ") + scheme + " --input " + x() + " --output '" + out + "'");
    const NpyArray y = read_npy(out);
    EXPECT_EQ(y.descr, "<f4");
    EXPECT_EQ(y.shape, (std::vector<size_t>{kRows, kCols}));
    const BlockScaling s = parse_block_scaling(scheme);
    std::vector<float> want(x_.size());
    block_fake_quantize_reference(s, x_, want, kRows, kCols);
    expect_same_bits(floats(y), want, scheme);

    // The report's statistics are analyze's, field for field, and its QSNR is the arrays'.
    const nlohmann::json a = run_json(std::string("analyze --formats ") + scheme + " --input " + x());
    ASSERT_TRUE(q.contains("results") && a.contains("results"));
    EXPECT_EQ(q["results"]["scheme"], a["results"]["tensors"][0]["schemes"][0]);
    EXPECT_EQ(q["config"]["mode"], "array-scheme-values");
    long double signal = 0, noise = 0;
    for (size_t i = 0; i < x_.size(); ++i) {
      signal += static_cast<long double>(x_[i]) * x_[i];
      noise += (static_cast<long double>(want[i]) - x_[i]) * (static_cast<long double>(want[i]) - x_[i]);
    }
    const double qsnr = static_cast<double>(10 * std::log10(signal / noise));
    EXPECT_NEAR(q["results"]["scheme"]["qsnr_db"].get<double>(), qsnr, 1e-9 * std::fabs(qsnr));
  }
}

TEST_F(QuantizeSchemeCli, StochasticRoundingIsKeyedAsAnalyzeKeysIt) {
  const std::string opts = " --rounding stochastic --seed 3 --sr-bits 8";
  const nlohmann::json q =
      run_json("quantize -f mxfp4 --input " + x() + " --output '" + path("y.npy") + "'" + opts);
  BlockScaling s = parse_block_scaling("mxfp4");
  s.element_options.rounding = Rounding::kStochastic;
  s.element_options.sr_key.seed = 3;
  s.element_options.sr_bits = 8;
  std::vector<float> want(x_.size());
  block_fake_quantize_reference(s, x_, want, kRows, kCols);
  expect_same_bits(floats(read_npy(path("y.npy"))), want, "mxfp4 stochastic");
  const nlohmann::json a = run_json("analyze --formats mxfp4 --input " + x() + opts);
  EXPECT_EQ(q["results"]["scheme"], a["results"]["tensors"][0]["schemes"][0]);
}

// --codes: the element codes (FP4 two a byte) and the scales are block_quantize's, and decoding
// them gives the fake-quantized values bit for bit.
TEST_F(QuantizeSchemeCli, CodesAndScalesDecodeToTheValues) {
  for (const char* scheme : {"mxfp4", "mxfp4:axis=0", "mxfp8_e4m3", "mxint8", "nvfp4", "fp8_e4m3:tile128"}) {
    SCOPED_TRACE(scheme);
    const std::string codes = path("c.npy");
    const nlohmann::json q = run_json(std::string("quantize -f ") + scheme + " --input " + x() + " --codes --output '" + codes + "'");
    const BlockScaling s = parse_block_scaling(scheme);
    const BlockPacked want = block_quantize_reference(s, x_, kRows, kCols);
    const NpyArray c = read_npy(codes), sc = read_npy(path("c.scales.npy"));
    EXPECT_EQ(c.descr, "|u1");
    EXPECT_EQ(c.shape, (std::vector<size_t>{s.axis == 1 ? kRows : kCols, want.code_row_bytes}));
    EXPECT_EQ(c.data, want.codes);
    EXPECT_EQ(sc.shape, (std::vector<size_t>{want.scale_rows, want.scale_cols}));
    EXPECT_EQ(sc.data, want.scales);
    EXPECT_EQ(sc.descr, s.scale_format == ScaleFormat::kFp32 ? "<f4" : "|u1");
    if (s.element.bits() == 4) {
      EXPECT_EQ(c.data.size(), s.axis == 1 ? kRows * 75 : kCols * 3);  // two codes a byte
    }
    const auto& packed = q["results"]["packed"];
    EXPECT_EQ(packed["tensor_scale_hex"], hex_float(want.tensor_scale));
    if (s.rule == ScaleRule::kNvfp4) {
      EXPECT_NE(want.tensor_scale, 1.0f);
    }
    // What a user does with the files: codes x scales x tensor scale.
    BlockPacked p = want;
    p.codes = c.data;
    p.scales = sc.data;
    p.tensor_scale = static_cast<float>(read_number(packed["tensor_scale"]));
    std::vector<float> decoded(x_.size()), fake(x_.size());
    block_dequantize(s, p, decoded);
    block_fake_quantize_reference(s, x_, fake, kRows, kCols);
    expect_same_bits(decoded, fake, scheme);
  }
}

// Without --out or --json the report is not kept, so NVFP4's tensor scale, without which the
// codes do not decode, is printed with the table; MX codes need nothing more and print no line.
TEST_F(QuantizeSchemeCli, Nvfp4CodesWithoutAReportStillGiveTheTensorScale) {
  const BlockPacked want = block_quantize_reference(parse_block_scaling("nvfp4"), x_, kRows, kCols);
  const CliResult r = run_split("quantize -f nvfp4 --input " + x() + " --codes --output '" + path("c.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("tensor scale " + hex_float(want.tensor_scale) + " = "), std::string::npos) << r.out;
  const CliResult mx = run_split("quantize -f mxfp4 --input " + x() + " --codes --output '" + path("c.npy") + "'");
  ASSERT_EQ(mx.rc, 0) << mx.err;
  EXPECT_EQ(mx.out.find("tensor scale"), std::string::npos) << mx.out;
}

// A NaN poisons its block, and the report and stderr say how many finite inputs it took along.
TEST_F(QuantizeSchemeCli, NanAndInfInputsAreCountedAndTheirBlocksNamed) {
  std::vector<float> v(kRows * kCols, 1.5f);
  v[5] = NAN;           // block 0 of row 0 (MX blocks of 32 along the rows)
  v[kCols + 40] = INFINITY;  // block 1 of row 1
  write_npy(path("bad.npy"), "<f4", {kRows, kCols}, v.data(), v.size() * 4);
  const CliResult r = run_split("quantize -f mxfp8_e4m3 --input '" + path("bad.npy") + "' --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["results"]["nonfinite_inputs"], 2);
  EXPECT_EQ(j["results"]["scheme"]["nonfinite_blocks"], 2);
  EXPECT_EQ(j["results"]["scheme"]["poisoned"], 62);  // 31 finite neighbours in each block of 32
  EXPECT_NE(r.err.find("2 of 900 inputs are NaN or Inf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mxfp8_e4m3 62"), std::string::npos) << r.err;
  // analyze says the same, and why e4m3's QSNR is a number where MX's is nan.
  const CliResult a = run_split("analyze --formats e4m3,mxfp8_e4m3 --input '" + path("bad.npy") + "' --json");
  ASSERT_EQ(a.rc, 0) << a.err;
  const nlohmann::json doc = nlohmann::json::parse(a.out);
  const auto& schemes = doc["results"]["tensors"][0]["schemes"];
  EXPECT_EQ(schemes[0]["poisoned"], 0);
  EXPECT_EQ(schemes[1]["poisoned"], 62);
  EXPECT_EQ(schemes[1]["qsnr_db"], "nan");
  EXPECT_NE(a.err.find("2 of 900 inputs are NaN or Inf"), std::string::npos) << a.err;
}

TEST_F(QuantizeSchemeCli, BadUseIsRefusedBeforeAnythingIsWritten) {
  auto refused = [&](const std::string& args, const std::string& what) {
    const CliResult r = run_split(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("precsim: error:")) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("y.npy"))) << args;
    EXPECT_FALSE(std::filesystem::exists(path("y.scales.npy"))) << args;
  };
  // --out where --output was meant: the JSON report would land in the .npy.
  refused("quantize -f mxfp4 --input " + x() + " --out '" + path("y.npy") + "'", "--output FILE.npy");
  refused("quantize -f e4m3 1 --out '" + path("y.npy") + "'", "--out takes the JSON report");
  refused("quantize -f mxfp4 1 2 3", "block-scaling scheme: give --input");
  refused("quantize -f mxfp4 --input " + x() + " --codes", "--codes needs --output");
  refused("quantize -f mxfp4 --input " + x() + " --codes --output '" + path("y.npy") + "' --scales /nonexistent/s.npy",
          "--scales");
  refused("quantize -f mxfp4 --input " + x() + " --input-format e4m3 --output '" + path("y.npy") + "'", "plain formats");
  refused("quantize -f e4m3 --input " + x() + " --scales '" + path("y.scales.npy") + "'", "block-scaling schemes");
  refused("quantize -f mxfp4 --input " + x() + " --output '" + path("y.npy") + "' --scales '" + path("y.scales.npy") + "'",
          "--scales goes with --codes");
  refused("quantize -f mxfp4:rule=wat --input " + x() + " --output '" + path("y.npy") + "'", "wat");
}

}  // namespace
}  // namespace precsim

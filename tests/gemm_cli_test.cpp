// `precsim gemm` end to end: the FP8 finding through the CLI, .npy operands, and bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/formats/quantize.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"

namespace {

using precsim::test_support::CliRun;
CliRun run(const std::string& args, bool with_stderr = false) {
  return precsim::test_support::run_precsim(args, with_stderr);
}

CliRun run_err(const std::string& args) { return run(args, true); }

TEST(GemmCli, Fp8FastAccumulationSweep) {
  const CliRun r = run("gemm --m 8 --n 8 --sweep-k 256,4096 --a-format e4m3 --b-format e4m3 --dist uniform:low=0,high=1 "
                    "--model h100-fp8-fast,h100-fp8-promote --json --deterministic");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "gemm");
  const auto& k4096 = j["results"]["sweep"][1];
  EXPECT_EQ(k4096["k"], 4096);
  const double fast = k4096["models"][0]["error"]["normwise_error"].get<double>();
  const double promoted = k4096["models"][1]["error"]["normwise_error"].get<double>();
  EXPECT_GT(fast, 10 * promoted);
  // The error grows with K without promotion.
  EXPECT_GT(fast, j["results"]["sweep"][0]["models"][0]["error"]["normwise_error"].get<double>());
  // Deterministic: the same run gives the same bytes.
  EXPECT_EQ(run("gemm --m 8 --n 8 --sweep-k 256,4096 --a-format e4m3 --b-format e4m3 --dist uniform:low=0,high=1 "
                "--model h100-fp8-fast,h100-fp8-promote --json --deterministic").out, r.out);
}

TEST(GemmCli, NpyOperandsAndShapeMismatch) {
  const auto dir = std::filesystem::temp_directory_path() / "precsim_gemm_cli_test";
  std::filesystem::create_directories(dir);
  std::vector<float> a(3 * 4, 1.0f), b(4 * 2, 0.5f), bad(5 * 2, 1.0f);
  precsim::write_npy((dir / "a.npy").string(), "<f4", {3, 4}, a.data(), a.size() * 4);
  precsim::write_npy((dir / "b.npy").string(), "<f4", {4, 2}, b.data(), b.size() * 4);
  precsim::write_npy((dir / "bad.npy").string(), "<f4", {5, 2}, bad.data(), bad.size() * 4);
  const CliRun ok = run("gemm --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string() +
                     " --model exact --json");
  ASSERT_EQ(ok.rc, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["config"]["m"], 3);
  EXPECT_EQ(j["results"]["sweep"][0]["models"][0]["error"]["max_ulp_error"], 0);
  const CliRun mismatch = run_err("gemm --a " + (dir / "a.npy").string() + " --b " + (dir / "bad.npy").string());
  EXPECT_EQ(mismatch.rc, 2);
  EXPECT_NE(mismatch.out.find("A's columns must equal B's rows"), std::string::npos) << mismatch.out;
  std::filesystem::remove_all(dir);
}

// A .npy written column-major (NumPy's Fortran order), as np.asfortranarray(x).tofile would.
void write_fortran_npy(const std::string& path, const std::string& descr, std::vector<size_t> shape,
                       const void* data, size_t bytes) {
  std::string header = precsim::npy_header(descr, shape);
  header.replace(header.find("False"), 5, "True ");
  std::ofstream(path, std::ios::binary).write(header.data(), header.size()).write(static_cast<const char*>(data), bytes);
}

// --output: C is the library's gemm() on the operands rounded into their formats, bit for bit;
// A given as a Fortran-order float16 array gives the same C as the same values in float32.
TEST(GemmCli, OutputIsTheLibrarysProductAndReadsFloat16FortranOrder) {
  const auto dir = std::filesystem::temp_directory_path() / "precsim_gemm_cli_output";
  std::filesystem::create_directories(dir);
  const int64_t m = 5, k = 300, n = 7;
  std::vector<float> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 2003) / 256.0f - 3.5f;  // fp16 values
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::sin(static_cast<float>(i)) * 1e3f;
  const std::string pa = (dir / "a.npy").string(), pb = (dir / "b.npy").string(), pc = (dir / "c.npy").string();
  precsim::write_npy(pa, "<f4", {size_t(m), size_t(k)}, a.data(), a.size() * 4);
  precsim::write_npy(pb, "<f4", {size_t(k), size_t(n)}, b.data(), b.size() * 4);
  const CliRun r = run_err("gemm --a " + pa + " --b " + pb + " --model h100 --output " + pc);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + pc), std::string::npos) << r.out;
  const precsim::NpyArray c = precsim::read_npy(pc);
  ASSERT_EQ(c.descr, "<f4");
  ASSERT_EQ(c.shape, (std::vector<size_t>{size_t(m), size_t(n)}));

  precsim::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a_format = g.b_format = precsim::format_by_name("bf16");
  g.input_policy = precsim::InputPolicy::kTrust;
  std::vector<float> qa = a, qb = b, want(m * n);
  precsim::quantize(g.a_format, std::span<const float>(qa), std::span<float>(qa));
  precsim::quantize(g.b_format, std::span<const float>(qb), std::span<float>(qb));
  precsim::gemm(precsim::parse_accum_model("h100"), g, qa.data(), qb.data(), want.data());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(c.as<float>()[i], want[i]) << i;

  // The same A as float16, stored column-major: element (i, p) at p * m + i.
  std::vector<uint16_t> a16(m * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      precsim::encode_array(precsim::format_by_name("fp16"), std::span<const float>(&a[i * k + p], 1), &a16[p * m + i]);
    }
  const std::string pa16 = (dir / "a16.npy").string(), pc16 = (dir / "c16.npy").string();
  write_fortran_npy(pa16, "<f2", {size_t(m), size_t(k)}, a16.data(), a16.size() * 2);
  ASSERT_EQ(run_err("gemm --a " + pa16 + " --b " + pb + " --model h100 --output " + pc16).rc, 0);
  EXPECT_EQ(precsim::read_npy(pc16).data, c.data);

  // One product per file: several models or K values are refused before any work.
  const CliRun two = run_err("gemm --a " + pa + " --b " + pb + " --model h100,a100 --output " + pc16);
  EXPECT_EQ(two.rc, 2);
  EXPECT_NE(two.out.find("give one --model"), std::string::npos) << two.out;
  std::filesystem::remove_all(dir);
}

// NaN and Inf operands are said, with how many outputs they reach.
TEST(GemmCli, NonFiniteOperandsAreCounted) {
  const auto dir = std::filesystem::temp_directory_path() / "precsim_gemm_cli_nan";
  std::filesystem::create_directories(dir);
  std::vector<float> a(4 * 8, 1.0f), b(8 * 32, 0.5f);
  a[3] = NAN;       // row 0 of A: every output of row 0 is NaN (32 of them)
  a[8 + 1] = INFINITY;  // row 1: Inf x 0.5 summed with finite values: Inf
  const std::string pa = (dir / "a.npy").string(), pb = (dir / "b.npy").string();
  precsim::write_npy(pa, "<f4", {4, 8}, a.data(), a.size() * 4);
  precsim::write_npy(pb, "<f4", {8, 32}, b.data(), b.size() * 4);
  const std::string rep = (dir / "r.json").string();
  const CliRun r = run_err("gemm --a " + pa + " --b " + pb + " --model fp32-seq --out " + rep);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(rep);
  const auto j = nlohmann::json::parse(in);
  const auto& s = j["results"]["sweep"][0];
  EXPECT_EQ(s["nonfinite_inputs"]["a"], 2);
  EXPECT_EQ(s["nonfinite_inputs"]["b"], 0);
  EXPECT_EQ(s["models"][0]["nan_outputs"], 32);
  EXPECT_EQ(s["models"][0]["inf_outputs"], 32);
  const std::string& err = r.out;
  EXPECT_NE(err.find("warning: A: 2 of 32 elements are NaN or Inf"), std::string::npos) << err;
  EXPECT_NE(err.find("32 NaN and 32 Inf among the 128 outputs"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

// Outputs whose exact value is NaN or Inf have no error: they are counted apart, and the errors
// are those of the finite outputs alone, recomputed here from the written product.
TEST(GemmCli, ErrorsCoverTheFiniteOutputsOnly) {
  const auto dir = std::filesystem::temp_directory_path() / "precsim_gemm_cli_nan_norm";
  std::filesystem::create_directories(dir);
  constexpr int m = 4, k = 8, n = 32;
  std::vector<float> a(m * k), b(k * n);
  // BF16-exact operands (7 fraction bits) over 23 binades: fp32-seq rounds, while each exact sum
  // (16-bit products spread over < 40 bits) is exact in double.
  for (int i = 0; i < m * k; ++i) a[i] = 1.0f + static_cast<float>(i % 13) / 128.0f;
  for (int i = 0; i < k * n; ++i)
    b[i] = std::ldexp(1.0f + static_cast<float>(i % 29) / 128.0f, -((i / n) * 5 + i % 7) % 23);
  a[0 * k + 3] = NAN;       // row 0: exact NaN everywhere
  a[1 * k + 1] = INFINITY;  // row 1: exact Inf everywhere
  const std::string pa = (dir / "a.npy").string(), pb = (dir / "b.npy").string(), pc = (dir / "c.npy").string();
  precsim::write_npy(pa, "<f4", {m, k}, a.data(), a.size() * 4);
  precsim::write_npy(pb, "<f4", {k, n}, b.data(), b.size() * 4);
  const CliRun r = run_err("gemm --a " + pa + " --b " + pb + " --model fp32-seq --output " + pc + " --out " +
                           (dir / "r.json").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(dir / "r.json");
  const auto e = nlohmann::json::parse(in)["results"]["sweep"][0]["models"][0]["error"];
  EXPECT_EQ(e["exact_nonfinite"], 2 * n);
  EXPECT_EQ(e["nonfinite"], 0);
  const precsim::NpyArray c = precsim::read_npy(pc);
  ASSERT_EQ(c.descr, "<f4");
  double num = 0, den = 0;
  for (int i = 2; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double exact = 0;
      for (int t = 0; t < k; ++t) exact += static_cast<double>(a[i * k + t]) * b[t * n + j];
      float got;
      std::memcpy(&got, c.data.data() + (i * n + j) * sizeof(float), sizeof(float));
      num += (got - exact) * (got - exact);
      den += exact * exact;
    }
  ASSERT_GT(num, 0);  // fp32-seq rounded: the norm below is not 0 by construction
  EXPECT_NEAR(e["normwise_error"].get<double>(), std::sqrt(num / den), 1e-12 * std::sqrt(num / den));
  EXPECT_NE(r.out.find("64 have a NaN or Inf exact value (left out of the errors)"), std::string::npos) << r.out;
  // With every output non-finite there is no error to give: "nan", not 0.
  a[2 * k] = a[3 * k] = NAN;
  precsim::write_npy(pa, "<f4", {m, k}, a.data(), a.size() * 4);
  const CliRun all = run("gemm --a " + pa + " --b " + pb + " --model fp32-seq --json");
  ASSERT_EQ(all.rc, 0) << all.out;
  const auto e2 = nlohmann::json::parse(all.out)["results"]["sweep"][0]["models"][0]["error"];
  EXPECT_EQ(e2["exact_nonfinite"], m * n);
  EXPECT_EQ(e2["normwise_error"], "nan");
  EXPECT_EQ(e2["max_rel_error"], "nan");
  std::filesystem::remove_all(dir);
}

TEST(GemmCli, RefusesShapesThatDoNotFitAndBadModels) {
  const CliRun big = run_err("gemm --m 100000 --n 100000 --k 100000 --model a100");
  EXPECT_EQ(big.rc, 2);
  EXPECT_NE(big.out.find("GiB"), std::string::npos) << big.out;
  const CliRun unknown = run_err("gemm --m 4 --n 4 --k 4 --model a100,h900");
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.out.find("'h900'"), std::string::npos) << unknown.out;
  const CliRun missing = run_err("gemm --a /nonexistent/a.npy --b /nonexistent/b.npy");
  EXPECT_EQ(missing.rc, 2);
  const CliRun no_f16 = run_err("gemm --m 4 --n 4 --k 16 --model h100,h100-tf32 --output-format fp16");
  EXPECT_EQ(no_f16.rc, 2);
  EXPECT_NE(no_f16.out.find("'h100-tf32' has no FP16-output variant"), std::string::npos) << no_f16.out;
}

TEST(GemmCli, OutputFormatFp16UsesTheFp16OutputInstruction) {
  const CliRun r = run("gemm --m 4 --n 4 --k 64 --a-format fp16 --b-format fp16 --model h100,b200 "
                       "--output-format fp16 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["models"][0]["name"], "h100-f16acc");
  EXPECT_EQ(j["config"]["models"][1]["name"], "b200-f16acc");
  EXPECT_EQ(j["config"]["models"][1]["acc"], "fp16");
}

}  // namespace

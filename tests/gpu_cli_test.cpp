// `precsim gpu info|gemm|probe` end to end against the stand-in GPU library
// (tests/support/fake_gpu_library.cpp), which answers the C interface with the H100 emulation: the
// encoding, layouts, comparison and reports of a device run, checked on a machine without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace {

const std::string kFake = std::string(PRECSIM_BINARY_DIR) + "/libprecsim_gpu_fake.so";

struct CliResult {
  int code;
  nlohmann::json report;
  std::string err;
};

CliResult run(const std::string& args) {
  // Names of this process's own: ctest runs the GPU test binaries side by side.
  const std::string dir = ::testing::TempDir() + "/gpu_cli_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/gpu_cli_report.json", err = dir + "/gpu_cli_err.txt";
  std::remove(out.c_str());
  const std::string cmd = "PRECSIM_GPU_LIBRARY=" + kFake + " " + PRECSIM_CLI + " " + args + " --out " + out +
                          " >/dev/null 2>" + err;
  const int status = std::system(cmd.c_str());
  CliResult r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, nullptr, ""};
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::ifstream f(out);
  if (f) r.report = nlohmann::json::parse(f);
  return r;
}

TEST(GpuCli, InfoListsTheDevice) {
  const CliResult r = run("gpu info");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.report["kind"], "gpu-info");
  EXPECT_EQ(r.report["results"]["devices"][0]["compute_capability"], "9.0");
  EXPECT_EQ(r.report["results"]["driver_version"], "13.0");
}

TEST(GpuCli, HalfPrecisionGemmMatchesH100BitForBitOnEveryOperandSet) {
  // Non-square, K not a multiple of the block: a transposition slip would show.
  const CliResult r = run("gpu gemm --type bf16 --m 24 --n 40 --k 200 --require-match h100 --presets h100,a100,exact");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.report["kind"], "gpu-gemm");
  EXPECT_EQ(r.report["results"]["best_preset"], "h100");
  ASSERT_EQ(r.report["results"]["sets"].size(), 4u);
  for (const auto& set : r.report["results"]["sets"]) {
    EXPECT_EQ(set["best_preset"], "h100") << set["operands"];
    EXPECT_EQ(set["presets"][0]["match"]["exact"], 24 * 40) << set["operands"];
  }
  EXPECT_TRUE(r.report["results"]["required_match"]["bit_exact"].get<bool>());
}

TEST(GpuCli, RequireMatchFailsWithExit1WhenThePresetDiffers) {
  const CliResult r = run("gpu gemm --type fp16 --m 16 --n 16 --k 256 --operands alignment --require-match a100 --presets a100,h100");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_FALSE(r.report["results"]["required_match"]["bit_exact"].get<bool>());
  EXPECT_EQ(r.report["results"]["sets"][0]["best_preset"], "h100");
}

TEST(GpuCli, Fp8FastAccumulationTellsPresetsApart) {
  const CliResult fast = run("gpu gemm --type e4m3 --fast-accum --m 16 --n 16 --k 512 --operands alignment,random");
  ASSERT_EQ(fast.code, 0) << fast.err;
  EXPECT_EQ(fast.report["results"]["best_preset"], "h100-fp8-fast");
  const CliResult slow = run("gpu gemm --type e4m3 --m 16 --n 16 --k 512 --operands alignment,random");
  ASSERT_EQ(slow.code, 0) << slow.err;
  EXPECT_EQ(slow.report["results"]["best_preset"], "h100-fp8-promote");
}

TEST(GpuCli, ProbeInfersTheModelsAndSkipsWhatTheDeviceLacks) {
  const CliResult r = run("gpu probe --gemm e4m3-fast,e4m3 --gemm-k 256");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.report["kind"], "gpu-probe");
  std::map<std::string, nlohmann::json> t;
  for (const auto& row : r.report["results"]["targets"]) t[row["target"]] = row;
  EXPECT_EQ(t["wmma-f16"]["findings"]["frac_bits"], 25);
  EXPECT_EQ(t["wmma-f16"]["findings"]["block_size"], 16);
  EXPECT_EQ(t["wmma-f16"]["model"]["block"]["n"], 16);
  EXPECT_EQ(t["wmma-tf32"]["findings"]["block_size"], 8);
  EXPECT_EQ(t["wmma-f16-f16"]["findings"]["out_rounding"], "nearest-even");
  EXPECT_EQ(t["mma-e4m3"]["findings"]["frac_bits"], 13);
  EXPECT_TRUE(t["mma-e5m2"].contains("skipped"));
  EXPECT_EQ(t["wgmma-bf16"]["instruction_k"], 16);
  EXPECT_EQ(t["wgmma-bf16"]["findings"]["frac_bits"], 25);
  EXPECT_EQ(t["wgmma-bf16"]["findings"]["block_size"], 16);
  EXPECT_EQ(t["wgmma-e5m2"]["instruction_k"], 32);
  EXPECT_EQ(t["wgmma-e5m2"]["findings"]["frac_bits"], 13);
  EXPECT_EQ(t["cublaslt-e4m3-fast"]["findings"]["frac_bits"], 13);
  EXPECT_EQ(t["cublaslt-e4m3-fast"]["findings"]["promotion_interval"], 0);
  EXPECT_EQ(t["cublaslt-e4m3"]["findings"]["promotion_interval"], 128);
  EXPECT_EQ(t["cublaslt-e4m3"]["model"]["promote"], 128);
  EXPECT_EQ(t["cublaslt-e4m3"]["algorithms"][0]["algo_id"], 66);
}

TEST(GpuCli, AnUnsupportedInstructionAskedForByNameIsAnError) {
  const CliResult r = run("gpu probe --instr mma-e5m2 --gemm none");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("e5m2 mma left out"), std::string::npos) << r.err;
}

}  // namespace

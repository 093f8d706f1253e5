// Loading the GPU library and the CLI's behaviour where it cannot run: no library, no driver, no
// device (this machine), and bad arguments, which are refused before any device is touched.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "precsim/sim/hw/gpu_library.h"
#include "precsim/sim/hw/gpu_device.h"

namespace precsim {
namespace {

struct CliRun {
  int code;
  std::string out, err;
};

CliRun run_cli(const std::string& args, const std::string& env = "") {
  // Names of this process's own: ctest runs the GPU test binaries side by side.
  const std::string dir = ::testing::TempDir() + "/gpu_library_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/out.txt", err = dir + "/err.txt";
  const std::string cmd = env + " " + PRECSIM_CLI + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Whether this machine has a usable GPU (then the no-device expectations do not apply).
bool gpu_present(std::string* why) {
  try {
    const auto b = GpuLibrary::load();
    b->system_info();
    return true;
  } catch (const GpuError& e) {
    *why = e.what();
    return false;
  }
}

TEST(GpuLibrary, MissingLibraryIsNoLibrary) {
  try {
    GpuLibrary::load_from("/nonexistent/libprecsim_gpu.so");
    FAIL() << "loaded a missing library";
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kNoLibrary);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libprecsim_gpu.so"), std::string::npos);
  }
}

TEST(GpuLibrary, FileThatIsNotALibraryIsNoLibrary) {
  const std::string p = ::testing::TempDir() + "/not_a_library_" + std::to_string(getpid()) + ".so";
  std::ofstream(p) << "not ELF";
  try {
    GpuLibrary::load_from(p);
    FAIL();
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kNoLibrary);
  }
}

TEST(GpuLibrary, LibraryWithoutTheEntryPointIsNoLibrary) {
  try {
    GpuLibrary::load_from("libm.so.6");  // a real library without precsim_gpu_api
    FAIL();
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kNoLibrary);
    EXPECT_NE(std::string(e.what()).find("precsim_gpu_api"), std::string::npos);
  }
}

TEST(GpuLibrary, EnvironmentOverrideIsTheOnlyPlaceTried) {
  setenv("PRECSIM_GPU_LIBRARY", "/nonexistent/override.so", 1);
  try {
    GpuLibrary::load();
    FAIL();
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kNoLibrary);
    EXPECT_NE(std::string(e.what()).find("PRECSIM_GPU_LIBRARY"), std::string::npos);
  }
  unsetenv("PRECSIM_GPU_LIBRARY");
}

TEST(GpuLibrary, NoDriverOrDeviceIsNoDeviceWithTheCudaError) {
  std::shared_ptr<const GpuLibrary> b;
  try {
    b = GpuLibrary::load();
  } catch (const GpuError& e) {
    GTEST_SKIP() << "the GPU library is not built or not loadable here: " << e.what();
  }
  try {
    const GpuSystemInfo s = b->system_info();
    GTEST_SKIP() << "a GPU is present (" << s.devices.size() << " devices); the no-device path is not reachable";
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kNoDevice) << e.what();
    EXPECT_NE(std::string(e.what()).find("CUDA error"), std::string::npos) << e.what();
  }
}

TEST(GpuCli, InfoWithoutADeviceExits3AndWritesNothing) {
  std::string why;
  if (gpu_present(&why)) GTEST_SKIP() << "a GPU is present";
  const std::string report = ::testing::TempDir() + "/gpu_info_report_" + std::to_string(getpid()) + ".json";
  std::filesystem::remove(report);
  const CliRun r = run_cli("gpu info --out " + report);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("no usable GPU"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(report));
  const CliRun j = run_cli("gpu info --json");
  EXPECT_EQ(j.code, 3);
  EXPECT_TRUE(j.out.empty()) << j.out;
}

TEST(GpuCli, MissingLibraryExits3) {
  const CliRun r = run_cli("gpu info", "PRECSIM_GPU_LIBRARY=/nonexistent/libprecsim_gpu.so");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/libprecsim_gpu.so"), std::string::npos) << r.err;
}

TEST(GpuCli, BadArgumentsExit2BeforeAnyDeviceIsTouched) {
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {"gpu gemm --type fp99", "allowed: fp32, tf32, fp16, bf16, e4m3, e5m2"},
      {"gpu gemm --type bf16 --accumulate fp16", "--accumulate fp16 needs --type fp16"},
      {"gpu gemm --type bf16 --accumulate fp64", "allowed: fp32, fp16"},
      {"gpu gemm --type e4m3 --k 100", "multiples of 16"},
      {"gpu gemm --type bf16 --fast-accum", "FP8 types only"},
      {"gpu gemm --type fp16 --b-type e4m3", "only the FP8 types"},
      {"gpu gemm --operands random,diagonal", "unknown operand set 'diagonal'"},
      {"gpu gemm --presets h100,h999", "h999"},
      {"gpu gemm --require-match a100 --presets h100", "not among the presets"},
      {"gpu probe --instr wmma-f64", "allowed: wmma-f16"},
      {"gpu probe --gemm fp16-fast", "-fast applies to FP8 only"},
      {"gpu probe --gemm int4", "allowed: fp32"},
      {"gpu probe --gemm-k 100", "multiple of 32"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(GpuTypes, CodesRoundTripAndTf32TravelsAsFp32) {
  const std::vector<double> v = {1.0, -2.5, 0.0, 0.375};
  for (const auto& t : gpu_types()) EXPECT_EQ(decode_codes(t, encode_codes(t, v)), v) << t.name;
  const std::vector<unsigned char> c = encode_codes(gpu_type("tf32"), {1.0 + std::ldexp(1.0, -10)});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24, 0x3F802000);
  EXPECT_EQ(encode_codes(gpu_type("e4m3"), {448.0})[0], 0x7E);
  EXPECT_EQ(encode_codes(gpu_type("bf16"), {-1.0})[1], 0xBF);
}

TEST(GpuTypes, ValuesOutsideTheTypeAreRefused) {
  EXPECT_THROW(encode_codes(gpu_type("fp16"), {0.1}), std::invalid_argument);
  EXPECT_THROW(encode_codes(gpu_type("tf32"), {1.0 + std::ldexp(1.0, -11)}), std::invalid_argument);
  EXPECT_THROW(gpu_type("fp64"), std::invalid_argument);
  EXPECT_THROW(probe_instr("wgmma-f64"), std::invalid_argument);
  EXPECT_EQ(probe_instr("wgmma-f16").abi, PRECSIM_GPU_WGMMA_F16_F32);
  EXPECT_EQ(probe_instr("wgmma-e5m2").in, "e5m2");
}

}  // namespace
}  // namespace precsim

// Real-device checks: they run where a CUDA device is present (the device bundle runs this binary
// on an H200) and skip with the reason everywhere else. On Hopper, FP16/BF16 GEMMs with a pinned
// algorithm must match the h100 preset bit for bit, and the probes must find its parameters.
#include <gtest/gtest.h>

#include <string>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/hw/gpu_library.h"
#include "precsim/sim/hw/gpu_compare.h"
#include "precsim/sim/hw/gpu_device.h"
#include "precsim/sim/hw/gpu_probe.h"

namespace precsim {
namespace {

class GpuDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gpu_ = GpuLibrary::load();
      info_ = gpu_->system_info();
    } catch (const GpuError& e) {
      GTEST_SKIP() << "no usable GPU: " << e.what();
    }
    const auto& d = info_.devices.at(0);
    cc_ = d.major * 10 + d.minor;
  }
  bool hopper() const { return cc_ == 90; }
  std::shared_ptr<const GpuLibrary> gpu_;
  GpuSystemInfo info_;
  int cc_ = 0;
};

TEST_F(GpuDevice, ListsDevicesWithVersions) {
  EXPECT_GT(info_.system.runtime_version, 0);
  EXPECT_GT(info_.system.driver_version, 0);
  EXPECT_GE(cc_, 70);
  EXPECT_GT(info_.devices[0].total_memory, 0u);
}

TEST_F(GpuDevice, PinnedHalfPrecisionGemmsMatchTheHopperPresetBitForBit) {
  if (!hopper()) GTEST_SKIP() << "the h100 preset describes sm_90; this device is sm_" << cc_;
  for (const std::string type : {"bf16", "fp16"}) {
    for (const auto& set : operand_set_names()) {
      DeviceGemmSpec s;
      s.m = s.n = 64;
      s.k = 512;
      s.a_type = s.b_type = type;
      const Format f = gpu_type(type).format;
      std::vector<float> a, b;
      make_operands(parse_operand_set(set), f, f, s.m, s.n, s.k, 3, a, b);
      PrecsimGpuGemmResult res{};
      const std::vector<double> d = device_gemm(*gpu_, s, a, b, &res);
      EXPECT_EQ(res.splitk_num, 1);
      GemmArgs ga;
      ga.m = s.m;
      ga.n = s.n;
      ga.k = s.k;
      ga.a_format = ga.b_format = f;
      std::vector<float> e(s.m * s.n);
      gemm(parse_accum_model("h100"), ga, a.data(), b.data(), e.data());
      const MatchStats st = compare_results(format_by_name("fp32"), d, std::vector<double>(e.begin(), e.end()));
      EXPECT_EQ(st.exact, st.count) << type << " " << set << ": max ulp " << st.max_ulp << ", algo " << res.algo_id;
    }
  }
}

TEST_F(GpuDevice, ProbesFindTheHopperHalfPrecisionParameters) {
  if (!hopper()) GTEST_SKIP() << "expected parameters are for sm_90; this device is sm_" << cc_;
  const ProbeInstr& in = probe_instr("wmma-f16");
  const int k = 2 * gpu_->probe_k(0, in.abi);
  const ProbeTarget t{in.name, format_by_name("fp16"), format_by_name("fp32"), true, k};
  const ProbeResult r = run_probes(t, instr_runner(*gpu_, 0, in, k));
  EXPECT_EQ(r.frac_bits, 25);
  EXPECT_EQ(r.block_size, 16);
  EXPECT_EQ(r.out_rounding, "toward-zero");
}

// Small integers give exact products and sums at any alignment width: every wgmma instruction must
// return c + sum a_i b_i exactly, which fails for any slip in the fragment or descriptor layouts
// (the pairing of a_i with b_i, the halves of k, a stray row or column).
TEST_F(GpuDevice, WgmmaComputesExactSmallDotProducts) {
  if (!hopper()) GTEST_SKIP() << "wgmma is sm_90a; this device is sm_" << cc_;
  for (const auto& in : probe_instrs()) {
    if (in.name.rfind("wgmma-", 0) != 0) continue;
    int ik = 0;
    try {
      ik = gpu_->probe_k(0, in.abi);
    } catch (const GpuError& e) {
      ADD_FAILURE() << in.name << " does not run on this Hopper: " << e.what();
      continue;
    }
    const int k = 2 * ik;
    std::vector<ProbeVector> vs(3);
    std::vector<double> expected;
    for (size_t v = 0; v < vs.size(); ++v) {
      double sum = 0.5 * double(v);
      for (int i = 0; i < k; ++i) {
        vs[v].a.push_back(double((i + v) % 7 + 1));
        vs[v].b.push_back(double((3 * i) % 5 + 1));
        sum += vs[v].a.back() * vs[v].b.back();
      }
      vs[v].c = 0.5 * double(v);
      expected.push_back(sum);
    }
    EXPECT_EQ(instr_runner(*gpu_, 0, in, k)(vs), expected) << in.name;
  }
}

TEST_F(GpuDevice, WgmmaProbesFindTheHopperParameters) {
  if (!hopper()) GTEST_SKIP() << "expected parameters are for sm_90; this device is sm_" << cc_;
  for (const std::string name : {"wgmma-f16", "wgmma-e4m3"}) {
    const ProbeInstr& in = probe_instr(name);
    const int k = 2 * gpu_->probe_k(0, in.abi);
    const ProbeTarget t{in.name, gpu_type(in.in).format, format_by_name("fp32"), true, k};
    const ProbeResult r = run_probes(t, instr_runner(*gpu_, 0, in, k));
    EXPECT_EQ(r.frac_bits, name == "wgmma-f16" ? 25 : 13) << name;
    EXPECT_EQ(r.block_size, name == "wgmma-f16" ? 16 : 32) << name;
  }
}

TEST_F(GpuDevice, Fp8OnHopperNeedsMultiplesOf16AndSaysSo) {
  if (cc_ < 89) GTEST_SKIP() << "FP8 GEMMs need sm_89 or later";
  DeviceGemmSpec s;
  s.m = s.n = 16;
  s.k = 24;
  s.a_type = s.b_type = "e4m3";
  std::vector<float> a(16 * 24, 1.0f), b(24 * 16, 1.0f);
  PrecsimGpuGemmResult res{};
  try {
    device_gemm(*gpu_, s, a, b, &res);
    FAIL() << "k = 24 accepted";
  } catch (const GpuError& e) {
    EXPECT_EQ(e.kind, GpuErrorKind::kBadArgument) << e.what();
  }
}

}  // namespace
}  // namespace precsim

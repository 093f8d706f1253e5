// Probe inference on synthetic device outputs: the vectors are evaluated by the emulated block-FMA
// model with known parameters, and the inference must recover those parameters. A real device's
// outputs take the same path in `precsim gpu probe`.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/hw/gpu_device.h"
#include "precsim/sim/hw/gpu_probe.h"
#include "precsim/sim/accum/accum_model_json.h"

namespace precsim {
namespace {

ProbeRunner emulated(const AccumModel& model, const Format& in) {
  return [model, in](const std::vector<ProbeVector>& vs) {
    std::vector<double> d;
    for (const auto& v : vs) {
      std::vector<float> a(v.a.begin(), v.a.end()), b(v.b.begin(), v.b.end());
      d.push_back(accum_dot(model, a, b, v.c, in, in));
    }
    return d;
  };
}

ProbeTarget target(const std::string& in, const std::string& out, bool has_c, int k) {
  return {"test", format_by_name(in), format_by_name(out), has_c, k};
}

TEST(GpuProbe, RecoversH100HalfPrecisionModel) {
  const ProbeTarget t = target("fp16", "fp32", true, 32);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("h100"), t.in));
  EXPECT_EQ(r.frac_bits, 25);
  EXPECT_FALSE(r.frac_bits_at_least);
  EXPECT_EQ(r.align_rounding, "toward-zero");
  EXPECT_EQ(r.out_frac_bits, 23);
  EXPECT_EQ(r.out_rounding, "toward-zero");
  EXPECT_EQ(r.block_size, 16);
  EXPECT_FALSE(r.block_size_at_least);
  EXPECT_EQ(r.block_pattern, std::string(14, '.') + std::string(16, '|'));
  EXPECT_EQ(r.input_subnormals, "kept");
  EXPECT_EQ(r.output_subnormals, "kept");
  EXPECT_EQ(r.monotonic, "no");  // truncation relative to the largest exponent (Mikaitis 2024)
  EXPECT_EQ(r.promotion_interval, -1);  // F + 4 > 23: FP32 could not show a promotion
  EXPECT_EQ(r.promotion_pattern, "");
}

// The wgmma targets as `precsim gpu probe` builds them (vectors of two instruction k), on outputs
// of the H100 presets: 16-bit wgmma adds 16 products with 25 bits kept, FP8 wgmma (an instruction,
// so no promotion) 32 products with 13 bits.
TEST(GpuProbe, WgmmaTargetsRecoverTheH100Models) {
  for (const auto& in : probe_instrs()) {
    if (in.name.rfind("wgmma-", 0) != 0) continue;
    const bool fp8 = in.in == "e4m3" || in.in == "e5m2";
    const ProbeTarget t{in.name, gpu_type(in.in).format, gpu_type(in.out).format, true, fp8 ? 64 : 32};
    const ProbeResult r = run_probes(t, emulated(parse_accum_model(fp8 ? "h100-fp8-fast" : "h100"), t.in));
    EXPECT_EQ(r.frac_bits, fp8 ? 13 : 25) << in.name;
    EXPECT_EQ(r.block_size, fp8 ? 32 : 16) << in.name;
    EXPECT_EQ(r.align_rounding, "toward-zero") << in.name;
    EXPECT_EQ(r.input_subnormals, "kept") << in.name;
  }
}

TEST(GpuProbe, RecoversA100Bf16Model) {
  const ProbeTarget t = target("bf16", "fp32", true, 32);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("a100"), t.in));
  EXPECT_EQ(r.frac_bits, 24);
  EXPECT_EQ(r.block_size, 8);
  EXPECT_EQ(r.out_rounding, "toward-zero");
  EXPECT_EQ(r.output_subnormals, "kept");
}

TEST(GpuProbe, HopperFp8FastAccumulationKeeps13BitsAndNeverPromotes) {
  const ProbeTarget t = target("e4m3", "fp32", false, 256);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("h100-fp8-fast"), t.in));
  EXPECT_EQ(r.frac_bits, 13);
  EXPECT_EQ(r.out_frac_bits, 13);
  EXPECT_TRUE(r.out_frac_bits_limited);
  EXPECT_EQ(r.out_rounding, "n/a");
  EXPECT_EQ(r.block_size, 32);
  EXPECT_EQ(r.promotion_interval, 0);
  EXPECT_EQ(r.promotion_pattern, std::string(7, '.'));
  EXPECT_EQ(r.monotonic, "n/a");  // no accumulator input on a library GEMM
}

TEST(GpuProbe, HopperFp8WithPromotionFindsTheInterval) {
  const ProbeTarget t = target("e4m3", "fp32", false, 256);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("h100-fp8-promote"), t.in));
  EXPECT_EQ(r.frac_bits, 13);
  EXPECT_EQ(r.block_size, 32);
  EXPECT_EQ(r.promotion_interval, 128);
  EXPECT_EQ(r.promotion_pattern, "...||||");
}

TEST(GpuProbe, Fp16ResultIsRoundedToNearestEven) {
  const ProbeTarget t = target("fp16", "fp16", true, 32);
  const AccumModel m = parse_accum_model("block:acc=fp16:n=16:F=25:ofb=10:final=nearest-even");
  const ProbeResult r = run_probes(t, emulated(m, t.in));
  EXPECT_EQ(r.frac_bits, 25);
  EXPECT_EQ(r.out_frac_bits, 10);
  EXPECT_EQ(r.out_rounding, "nearest-even");
  EXPECT_EQ(r.align_rounding, "toward-zero");
  EXPECT_EQ(r.block_size, 16);
}

TEST(GpuProbe, ExactSumHasNoVisibleBlocksOrAlignmentLoss) {
  const ProbeTarget t = target("fp16", "fp32", true, 32);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("exact"), t.in));
  EXPECT_TRUE(r.frac_bits_at_least);
  EXPECT_EQ(r.block_size, -1);
  EXPECT_EQ(r.out_frac_bits, 23);
  EXPECT_THROW(model_from_probe(t, r, "test"), std::runtime_error);
}

TEST(GpuProbe, InferredModelIsASpecThatReproducesThePreset) {
  const ProbeTarget t = target("fp16", "fp32", true, 32);
  const AccumModel h100 = parse_accum_model("h100");
  const ProbeResult r = run_probes(t, emulated(h100, t.in));
  const AccumModel m = model_from_probe(t, r, "synthetic");
  EXPECT_TRUE(m.calibrated);
  EXPECT_EQ(m.kind, AccumKind::kBlockFma);
  EXPECT_EQ(m.block.block_size, h100.block.block_size);
  EXPECT_EQ(m.block.frac_bits, h100.block.frac_bits);
  EXPECT_EQ(m.block.out_frac_bits, h100.block.out_frac_bits);
  EXPECT_EQ(m.block.final_rounding, h100.block.final_rounding);
  const AccumModel back = parse_accum_model(to_json(m).dump());
  EXPECT_EQ(back.block, m.block);
  EXPECT_EQ(back.promote_every, 0);
}

TEST(GpuProbe, EvidenceRecordsEveryVector) {
  const ProbeTarget t = target("bf16", "fp32", true, 16);
  const ProbeResult r = run_probes(t, emulated(parse_accum_model("h100"), t.in));
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j["evidence"].is_array());
  EXPECT_GT(j["evidence"].size(), 80u);
  EXPECT_EQ(j["evidence"][0]["test"], "align_bits");
  EXPECT_EQ(j["evidence"][0]["d"], "0x1p-87");  // B - B + B/2, B = 2^(-126 + 40) for bf16 into fp32
}

TEST(GpuProbe, ARunnerThatLosesResultsIsAnError) {
  const ProbeTarget t = target("fp16", "fp32", true, 16);
  auto bad = [](const std::vector<ProbeVector>& vs) { return std::vector<double>(vs.size() - 1, 0.0); };
  EXPECT_THROW(run_probes(t, bad), std::runtime_error);
}

}  // namespace
}  // namespace precsim

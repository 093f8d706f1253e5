// What the commands call in the library (analysis/tensor_analysis, analysis/gemm_models,
// analysis/dot_error, analysis/allreduce_error, data/npy_floats, data/gemm_operands,
// hw/gpu_gemm_check), checked directly: against independent computations, hand-made cases, and the
// stand-in GPU library (tests/support/fake_gpu_library.cpp, the H100 emulation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/analysis/allreduce_error.h"
#include "precsim/sim/analysis/dot_error.h"
#include "precsim/sim/analysis/gemm_models.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "precsim/sim/data/gemm_operands.h"
#include "precsim/sim/data/npy_floats.h"
#include "precsim/sim/hw/gpu_gemm_check.h"

namespace precsim {
namespace {

// The FP32 sequential sum with another accumulator format.
AccumModel sequential_in(const std::string& acc) {
  return parse_accum_model(to_spec(parse_accum_model("fp32-seq")) + ":acc=" + acc);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TensorAnalysis, ShapesFoldIntoRowsOfTheLastDimension) {
  EXPECT_EQ(as_2d({}), std::make_pair(size_t{1}, size_t{1}));
  EXPECT_EQ(as_2d({7}), std::make_pair(size_t{1}, size_t{7}));
  EXPECT_EQ(as_2d({2, 3, 5}), std::make_pair(size_t{6}, size_t{5}));
}

TEST(TensorAnalysis, SchemesTakeTheOptionsButBlockScaledElementsKeepSaturating) {
  QuantOptions o;
  o.overflow = Overflow::kIeee;
  o.rounding = Rounding::kTowardZero;
  const auto s = resolve_schemes({"e4m3", "mxfp8_e4m3"}, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].element_options.overflow, Overflow::kIeee);
  EXPECT_EQ(s[1].element_options.overflow, Overflow::kSaturate);
  EXPECT_EQ(s[1].element_options.rounding, Rounding::kTowardZero);
  const auto all = resolve_schemes({"all"}, o);
  EXPECT_EQ(all.size(), format_presets().size() + block_scaling_presets().size());
  EXPECT_TRUE(contains(error_of([&] { resolve_schemes({}, o); }), "at least one"));
  EXPECT_TRUE(contains(error_of([&] { resolve_schemes({"nosuchformat"}, o); }), "nosuchformat"));
}

TEST(TensorAnalysis, CountsAndFractionsMatchAnIndependentQuantization) {
  std::vector<float> x(2 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(static_cast<float>(i % 7) - 3.0f, static_cast<int>(i % 23) - 11);
  x[5] = NAN;
  const std::vector<size_t> shape{2, 64};
  const auto schemes = resolve_schemes({"mxfp4", "bf16"}, QuantOptions{});
  const TensorAnalysis t = analyze_tensor(x, shape, schemes, 0);
  EXPECT_EQ(t.rows, 2u);
  EXPECT_EQ(t.cols, 64u);
  EXPECT_EQ(t.nonfinite, 1u);
  uint64_t zeros = 0, hist = 0;
  for (float v : x) zeros += v == 0;
  for (const auto& [e, c] : t.exponent_histogram) hist += c;
  EXPECT_EQ(t.zeros, zeros);
  EXPECT_EQ(hist + t.zeros + t.nonfinite, x.size());
  ASSERT_EQ(t.schemes.size(), 2u);
  std::vector<float> q(x.size());
  BlockStats bs;
  block_fake_quantize(schemes[0], x, q, 2, 64, &bs);
  const ErrorStats e = error_stats(x, q);
  const SchemeAnalysis& r = t.schemes[0];
  EXPECT_EQ(r.error.flushed, e.flushed);
  EXPECT_EQ(r.blocks.clipped_blocks, bs.clipped_blocks);
  EXPECT_DOUBLE_EQ(r.clipped_fraction, static_cast<double>(bs.clipped_blocks) / static_cast<double>(bs.blocks));
  EXPECT_DOUBLE_EQ(r.flushed_fraction, static_cast<double>(e.flushed) / static_cast<double>(e.nonzero_inputs));
  EXPECT_DOUBLE_EQ(r.bits_per_element, 4.25);
  EXPECT_EQ(r.blocks.nonfinite_blocks, 1u);                  // the NaN's block of 32
  EXPECT_EQ(t.schemes[1].error.noise_power, 0.0);           // small integers times 2^e: exact in bf16
}

TEST(TensorAnalysis, TheTensorIndexKeysStochasticRounding) {
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i) * 1e-4f;
  QuantOptions sr;
  sr.rounding = Rounding::kStochastic;
  const auto s = resolve_schemes({"bf16"}, sr);
  const auto t0 = analyze_tensor(x, {x.size()}, s, 0), t0b = analyze_tensor(x, {x.size()}, s, 0);
  const auto t1 = analyze_tensor(x, {x.size()}, s, 1);
  EXPECT_EQ(t0.schemes[0].error.mse, t0b.schemes[0].error.mse);
  EXPECT_NE(t0.schemes[0].error.mse, t1.schemes[0].error.mse);
}

NpyArray array_of(const std::string& descr, const void* data, size_t bytes, size_t count) {
  NpyArray a;
  a.descr = descr;
  a.shape = {count};
  a.data.assign(static_cast<const unsigned char*>(data), static_cast<const unsigned char*>(data) + bytes);
  return a;
}

TEST(NpyFloats, EveryDtypeConvertsAndOthersAreNamed) {
  const double d[3] = {0.1, -2.5, 1e300};
  const auto fd = npy_to_floats(array_of("<f8", d, sizeof d, 3), "x.npy");
  EXPECT_EQ(fd, (std::vector<float>{0.1f, -2.5f, INFINITY}));
  const int16_t i[2] = {-300, 7};
  EXPECT_EQ(npy_to_floats(array_of("<i2", i, sizeof i, 2), "x.npy"), (std::vector<float>{-300, 7}));
  const uint16_t h[2] = {0x3c00, 0xc000};  // fp16 1 and -2
  EXPECT_EQ(npy_to_floats(array_of("<f2", h, sizeof h, 2), "x.npy"), (std::vector<float>{1, -2}));
  const std::string bad = error_of([&] { npy_to_floats(array_of("<c8", d, 8, 1), "x.npy"); });
  EXPECT_TRUE(contains(bad, "'x.npy': dtype <c8 is not supported; allowed: <f4")) << bad;
}

// A 2x3x2 array written column-major reads back row-major: element (i, j, k) of a Fortran array
// sits at i + 2 j + 6 k; the expectation is that formula, not the reordering code.
TEST(NpyFloats, FortranOrderIsReadRowMajor) {
  const std::vector<size_t> shape = {2, 3, 2};
  std::vector<float> column_major(12);
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 2; ++k) column_major[i + 2 * j + 6 * k] = float(100 * i + 10 * j + k);
  NpyArray f = array_of("<f4", column_major.data(), 48, 12);
  f.shape = shape;
  f.fortran_order = true;
  std::vector<float> want;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 2; ++k) want.push_back(float(100 * i + 10 * j + k));
  EXPECT_EQ(npy_to_floats(f, "x.npy"), want);
  to_c_order(f);
  EXPECT_FALSE(f.fortran_order);
  EXPECT_EQ(std::vector<float>(f.as<float>(), f.as<float>() + 12), want);
}

TEST(NpyFloats, ReadsAFileWithItsShape) {
  const std::string path = ::testing::TempDir() + "/npy_floats_" + std::to_string(getpid()) + ".npy";
  const float v[6] = {1, 2, 3, 4, 5, 6};
  write_npy(path, "<f4", {2, 3}, v, sizeof v);
  const FloatTensor t = read_npy_floats(path);
  EXPECT_EQ(t.dtype, "<f4");
  EXPECT_EQ(t.shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(t.values, std::vector<float>(v, v + 6));
  std::remove(path.c_str());
}

TEST(GemmOperands, CancellingOperandsCancelAndUnknownNamesListTheChoices) {
  std::vector<float> a, b;
  generate_gemm_operand("cancel", false, 3, 8, 4, a);
  generate_gemm_operand("cancel", true, 8, 2, 4, b);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(a[r * 8 + k], a[r * 8 + k + 4]);
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 2; ++c) EXPECT_NEAR(b[(k + 4) * 2 + c], -b[k * 2 + c], 0.05);
  std::vector<float> a2;
  generate_gemm_operand("cancel", false, 3, 8, 4, a2);
  EXPECT_EQ(a, a2);
  const std::string e = error_of([&] { generate_gemm_operand("zipf", false, 2, 2, 0, a); });
  EXPECT_TRUE(contains(e, "zipf") && contains(e, "; allowed: normal: N(0,1)")) << e;
  const auto g = generate_worker_gradients(3, 10, 1, 0.5, 2.0);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_NE(g[0], g[1]);
}

TEST(AllReduceError, ExactReductionAndErrorsByHand) {
  const std::vector<std::vector<float>> g = {{1e8f, 1.0f, 0.0f}, {-1e8f, 2.0f, 0.0f}};
  const auto exact = exact_reduction(g, 2.0);
  EXPECT_EQ(exact, (std::vector<double>{0.0, 1.5, 0.0}));
  const std::vector<float> reduced = {0.0f, 1.5f * 1.01f, 0.0f};
  const ReductionError e = reduction_error(reduced, exact);
  const double d = static_cast<double>(1.5f * 1.01f) - 1.5;
  EXPECT_DOUBLE_EQ(e.rel_err_norm, std::fabs(d) / 1.5);
  EXPECT_DOUBLE_EQ(e.rel_err_max, std::fabs(d) / 1.5);
  EXPECT_DOUBLE_EQ(e.mean_rel_bias, d / 1.5);  // only the non-zero exact element counts
}

TEST(DotError, StagnationInFp16IsMeasuredInUlps) {
  // 2048 + 1 in an fp16 accumulator rounds back to 2048: one ulp (2) below the exact 2049 rounded.
  const AccumModel m = sequential_in("fp16");
  const std::vector<float> a = {1}, b = {1};
  const DotError d = dot_error(m, a, b, 2048, format_by_name("fp16"));
  EXPECT_EQ(d.exact, 2049);
  EXPECT_TRUE(d.exact_fits_fp64);
  EXPECT_EQ(d.result, 2048);
  EXPECT_DOUBLE_EQ(d.abs_error, 1);
  EXPECT_DOUBLE_EQ(d.rel_error, 1.0 / 2049);
  EXPECT_EQ(d.exact_in_acc, 2048);  // ties to even
  EXPECT_EQ(d.ulp_error, 0);
}

TEST(GemmModels, EachModelAgainstTheExactSampleAndTheStopHook) {
  GemmArgs g;
  g.m = g.n = 8;
  g.k = 256;
  g.a_format = g.b_format = format_by_name("bf16");
  g.out_format = format_by_name("fp32");
  std::vector<float> a, b;
  generate_gemm_operand("wide", false, 8, 256, 3, a);
  generate_gemm_operand("wide", true, 256, 8, 3, b);
  const std::vector<AccumModel> models = {parse_accum_model("fp32-seq"), sequential_in("bf16")};
  std::vector<GemmErrorStats> seen;
  size_t sampled = 0;
  QuantStats qa, qb;
  GemmModelsHooks hooks;
  hooks.on_sample = [&](size_t n) { sampled = n; };
  hooks.on_model = [&](const ModelGemmError& r) {
    seen.push_back(r.error);
    return true;
  };
  compare_gemm_models(g, a, b, models, 100, 3, &qa, &qb, hooks);
  EXPECT_EQ(sampled, 64u);  // all outputs when fewer than the sample
  EXPECT_EQ(qa.count, a.size());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_LT(seen[0].max_rel, seen[1].max_rel);  // an fp32 accumulator beats a bf16 one
  int calls = 0;
  hooks.on_model = [&](const ModelGemmError&) { return ++calls < 1; };
  compare_gemm_models(g, a, b, models, 100, 3, &qa, &qb, hooks);
  EXPECT_EQ(calls, 1);
}

TEST(GpuGemmCheck, TheStandInDeviceMatchesItsOwnPresetBest) {
  std::shared_ptr<const GpuLibrary> gpu;
  try {
    gpu = GpuLibrary::load_from(std::string(PRECSIM_BINARY_DIR) + "/libprecsim_gpu_fake.so");
  } catch (const GpuError& e) {
    FAIL() << e.what();
  }
  DeviceGemmSpec s;
  s.m = s.n = 16;
  s.k = 256;
  const std::vector<EmulatedPreset> presets = {{"a100", parse_accum_model("a100")}, {"h100", parse_accum_model("h100")}};
  std::vector<std::string> lines;
  std::vector<DeviceGemmCheck> checks;
  for (const char* set : {"alignment", "random"})
    checks.push_back(check_device_gemm(*gpu, s, set, presets, 5, [&](const std::string& l) { lines.push_back(l); }));
  EXPECT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "alignment operands, 16x16x256 bf16 on the device");
  const DeviceGemmCheck& c = checks[0];
  EXPECT_EQ(c.a.size(), 16u * 256);
  EXPECT_EQ(c.device.size(), 256u);
  ASSERT_EQ(c.scores.size(), 2u);
  EXPECT_EQ(c.scores[1].stats.exact, 256u);
  EXPECT_LT(c.scores[0].stats.exact, 256u);
  EXPECT_EQ(best_preset({"a100", "h100"}, checks), "h100");
  EXPECT_TRUE(matches_everywhere("h100", checks));
  EXPECT_FALSE(matches_everywhere("a100", checks));
}

}  // namespace
}  // namespace precsim

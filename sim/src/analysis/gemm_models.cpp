#include "precsim/sim/analysis/gemm_models.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "precsim/formats/quantize.h"

namespace precsim {
namespace {

// The exact reference of TF32 operands under one model's TF32 input rounding.
ExactSample tf32_reference(const GemmArgs& g, const AccumModel& mo, const std::vector<float>& a,
                           const std::vector<float>& b, const std::vector<int64_t>& index) {
  const bool a_tf32 = is_tf32(g.a_format), b_tf32 = is_tf32(g.b_format);
  std::vector<float> ra = a, rb = b;
  QuantOptions o;
  o.rounding = mo.tf32_rounding;
  quantize(g.a_format, ra, ra, a_tf32 ? o : QuantOptions{});
  quantize(g.b_format, rb, rb, b_tf32 ? o : QuantOptions{});
  return exact_gemm_sample(g, ra.data(), rb.data(), index, g.out_format);
}

}  // namespace

void compare_gemm_models(GemmArgs g, std::vector<float> a, std::vector<float> b, const std::vector<AccumModel>& models,
                         int64_t sample, uint64_t seed, QuantStats* qa, QuantStats* qb, const GemmModelsHooks& hooks) {
  const bool a_tf32 = is_tf32(g.a_format), b_tf32 = is_tf32(g.b_format);
  if (!a_tf32) quantize(g.a_format, a, a, {}, qa);
  if (!b_tf32) quantize(g.b_format, b, b, {}, qb);
  g.input_policy = a_tf32 || b_tf32 ? InputPolicy::kRound : InputPolicy::kTrust;
  const auto index = sample_outputs(g.m, g.n, sample, seed);
  if (hooks.on_sample) hooks.on_sample(index.size());
  ExactSample ex;
  if (!a_tf32 && !b_tf32) ex = exact_gemm_sample(g, a.data(), b.data(), index, g.out_format);
  for (const auto& mo : models) {
    std::vector<double> c(static_cast<size_t>(g.m * g.n));
    ModelGemmError r;
    r.model = &mo;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      r.stats = gemm(mo, g, a.data(), b.data(), c.data());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("model " + mo.name + ": " + e.what());
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (a_tf32 || b_tf32) ex = tf32_reference(g, mo, a, b, index);
    r.error = measure_error(ex, c.data(), g.out_format);
    r.c = c;
    if (hooks.on_model && !hooks.on_model(r)) break;
  }
}

}  // namespace precsim

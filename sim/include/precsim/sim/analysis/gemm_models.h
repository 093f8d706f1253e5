// Accumulation models side by side on one matrix product (`precsim gemm`): the operands rounded
// into their formats, C under each model, and its error against the exact product on a sample of
// outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "precsim/formats/quant_options.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/analysis/gemm_error.h"

namespace precsim {

struct ModelGemmError {
  const AccumModel* model = nullptr;
  GemmErrorStats error;
  GemmStats stats;
  double seconds = 0;  // wall time of the emulated product
  std::span<const double> c;  // the model's C, m x n row-major; valid only during on_model
};

struct GemmModelsHooks {
  // Before the exact reference: how many of the m x n outputs it covers.
  std::function<void(size_t sampled)> on_sample;
  // After each model; returning false stops before the next one (Ctrl-C).
  std::function<bool(const ModelGemmError&)> on_model;
};

// `a` (m x k) and `b` (k x n) are rounded to nearest-even into g.a_format and g.b_format (statistics
// into *qa, *qb), except TF32 operands, which stay FP32 so that each model applies its own TF32
// input rounding (and the exact reference is then computed per model). Outputs compared: `sample`
// of them, drawn from `seed` (all when m * n is smaller). g.input_policy is set here. Throws
// std::invalid_argument "model <name>: ..." when a model refuses the product.
void compare_gemm_models(GemmArgs g, std::vector<float> a, std::vector<float> b, const std::vector<AccumModel>& models,
                         int64_t sample, uint64_t seed, QuantStats* qa, QuantStats* qb, const GemmModelsHooks& hooks);

}  // namespace precsim

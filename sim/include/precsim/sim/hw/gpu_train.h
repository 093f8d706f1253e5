// `precsim train --backend cuda`: a variant's matrix products (forward, dgrad, wgrad) on cuBLASLt in
// the recipe's formats, with everything else (operand quantization, elementwise ops, loss scaling,
// optimizer) computed by the same Trainer as the emulated variant. The runner steps this twin beside
// the emulated variant from the same weights on the same batches (runner.h, RunHooks::gemm_executor).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/sim/hw/gpu_library.h"
#include "precsim/sim/train/recipe.h"
#include "precsim/sim/train/step_types.h"

namespace precsim {

// A per-tensor scaled FP8 operand as the device takes it: element values and one decode scale.
struct Fp8Operand {
  std::vector<float> elements;  // values of the element format
  float decode_scale = 1.0f;
};

// The elements q and the decode scale d of a fake-quantized per-tensor FP8 operand, whose values are
// v = fl32(q * d) (block_scaling.h's FP8 recipes; the decode scale is not kept beside the values):
// d is the float nearest amax(v) / q_max, for the largest element value q_max that allows one, for
// which q_i = v_i / d rounded into `element` gives fl32(q_i * d) == v_i for every finite v_i (NaN
// and Inf pass through as NaN elements). Where several decompositions exist (with a margin or
// power-of-two scales: they differ by powers of two, which a device product carries exactly), the
// one with the largest elements. Throws std::invalid_argument when none exists.
Fp8Operand split_fp8_operand(std::span<const float> values, const Format& element);

// Whether a device of compute capability major.minor runs every matrix product of the recipe on
// cuBLASLt: operand formats fp32, tf32, fp16, bf16 (8.0+) or e4m3/e5m2 (8.9+; at most one e5m2
// operand), scaling none or per-tensor (current, delayed). Throws GpuError(kUnsupported) naming the
// recipe, the product, the operand and what is allowed.
void check_cuda_recipe(const Recipe& r, const PrecsimGpuDevice& dev);

// FP8 products use cuBLASLt's fast accumulation in the forward pass and promotion in dgrad and
// wgrad, as Transformer Engine does (its split accumulator is on for the backward products).
bool cuda_fp8_fast_accum(GemmPass pass);

class CublasGemmExecutor : public GemmExecutor {
 public:
  // Checks the recipe (check_cuda_recipe) first.
  CublasGemmExecutor(std::shared_ptr<const GpuLibrary> gpu, const PrecsimGpuDevice& dev, const Recipe& r);
  // The accumulation model is the device's own; `model` (the emulation's) is not used. FP8 operands
  // are padded with zeros to multiples of 16 in m, n and k (cuBLASLt's alignment), which adds
  // nothing to any dot product.
  void gemm(GemmPass pass, const AccumModel& model, const GemmArgs& args, const float* a, const float* b,
            float* c) override;
  // Per pass: calls, and every distinct algorithm cuBLASLt ran (id, tile, stages, ...).
  nlohmann::json report() const;

 private:
  std::shared_ptr<const GpuLibrary> gpu_;
  int device_;
  std::array<GemmSpec, 3> specs_;
  std::array<uint64_t, 3> calls_{};
  std::array<nlohmann::json, 3> algorithms_;
};

// The cuBLASLt executor's fixed choices for a train report: FP8 fast accumulation per pass, FP8 padding.
nlohmann::json cuda_train_choices_json();

}  // namespace precsim

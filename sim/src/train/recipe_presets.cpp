// The recipe presets: one table of {name, builder, description}. Each builder starts from FP32 (or
// BF16 / FP16 autocast) and changes what its recipe changes; recipe_preset() names and resolves it.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "precsim/sim/train/recipe.h"

namespace precsim {
namespace {

TensorFormat tf(std::string name, Rounding r = Rounding::kNearestEven) {
  TensorFormat t;
  t.name = std::move(name);
  t.rounding = r;
  t.format = format_by_name(t.name);
  return t;
}

OperandSpec op(std::string name, Scaling s = Scaling::kNone, int block = 0, Rounding r = Rounding::kNearestEven) {
  return OperandSpec{tf(std::move(name), r), s, block};
}

GemmSpec gemm(OperandSpec a, OperandSpec b) { return GemmSpec{std::move(a), std::move(b)}; }

void all_gemms(Recipe& r, const std::string& f) {
  r.forward = gemm(op(f), op(f));
  r.dgrad = gemm(op(f), op(f));
  r.wgrad = gemm(op(f), op(f));
}

// Every tensor role in FP32: the base the presets change.
Recipe fp32() {
  Recipe r;
  r.weights = r.activations = r.activation_grads = r.weight_grads = r.optimizer_state = tf("fp32");
  r.attention.scores = tf("fp32");
  r.master_weights = tf("fp32");
  all_gemms(r, "fp32");
  return r;
}

// Autocast mixed precision: FP32 master weights and optimizer, 16-bit compute copies, GEMM inputs,
// op outputs and gradients.
Recipe amp(const std::string& f) {
  Recipe r = fp32();
  r.weights = tf(f);
  r.activations = tf(f);
  r.activation_grads = tf(f);
  r.weight_grads = tf(f);
  r.attention.scores = tf(f);
  all_gemms(r, f);
  return r;
}

Recipe pure_bf16(UpdateRounding u) {
  Recipe r = amp("bf16");
  r.master_weights.reset();
  r.update_rounding = u;
  r.autocast = false;
  r.optimizer_state = tf("bf16");
  return r;
}

// Block-scaled GEMMs on top of BF16 autocast: only the linear layers' operands change
// (docs/reference/sources.md §3.7: everything else stays in high precision).
Recipe scaled(const std::string& fwd, const std::string& bwd, Scaling s, int block,
              Rounding grad_rounding = Rounding::kNearestEven) {
  Recipe r = amp("bf16");
  r.forward = gemm(op(fwd, s, block), op(fwd, s, block));
  r.dgrad = gemm(op(bwd, s, block, grad_rounding), op(fwd, s, block));
  r.wgrad = gemm(op(bwd, s, block, grad_rounding), op(fwd, s, block));
  return r;
}

Recipe fp16_amp(LossScaleMode mode, double init_scale = 65536.0) {
  Recipe r = amp("fp16");
  r.loss_scaling.mode = mode;
  r.loss_scaling.init_scale = init_scale;
  return r;
}

Recipe fp8_blockwise() {
  Recipe r = scaled("e4m3", "e4m3", Scaling::kRowwise, 128);  // 1x128 activations and gradients
  r.forward.b.scaling = Scaling::kBlock2d;                    // 128x128 weights
  r.dgrad.b.scaling = Scaling::kBlock2d;
  return r;
}

// TE MXFP8BlockScaling: E4M3 everywhere; TE rounds the scale up (rceil), OCP floors.
Recipe mxfp8(ScaleRule rule) {
  Recipe r = scaled("e4m3", "e4m3", Scaling::kMx, 32);
  r.block.mx_scale_rule = rule;
  return r;
}

// NVFP4 with stochastically rounded gradients; the published recipe (arXiv 2509.25149 §4) adds RHT
// on the weight-gradient GEMM, 16x16 weights and about 16% of the layers in BF16, mostly the last
// (the 12B model: the first 2 and last 8 of 62 blocks). Here the last ceil(0.16 x layers):
// tiny-gpt's last block of 2.
Recipe nvfp4(bool published) {
  Recipe r = scaled("e2m1", "e2m1", Scaling::kNvfp4, 16, Rounding::kStochastic);
  r.block.sr_gradients = true;
  r.block.rht = r.block.weights_2d = published;
  if (published) r.keep_bf16.fraction = kNvfp4KeepBf16;
  return r;
}

// BF16 autocast, 8 workers summing BF16 buckets as NCCL does (docs/reference/sources.md TC 4.1).
Recipe ddp8_bf16(AllReduceAlgorithm a) {
  Recipe r = amp("bf16");
  r.parallel.workers = 8;
  r.parallel.format_name = "bf16";
  r.parallel.format = r.activations.format;
  r.parallel.algorithm = a;
  return r;
}

// BF16 autocast with 16 micro-batches summed in a BF16 buffer (reference 5.2, 5.3).
Recipe accum16_bf16(BufferRounding rounding) {
  Recipe r = amp("bf16");
  r.accumulation.micro_batches = 16;
  r.accumulation.buffer_format_name = "bf16";
  r.accumulation.buffer_format = r.activations.format;
  r.accumulation.rounding = rounding;
  return r;
}

// FP32, 8 workers: BatchNorm statistics per worker, or SyncBatchNorm across the 8.
Recipe ddp8_bn(BatchNormStats stats) {
  Recipe r = fp32();
  r.parallel.workers = 8;
  r.parallel.batchnorm = stats;
  return r;
}

// FP32, 4 micro-batches, loss averaged per micro-batch (the Hugging Face Trainer bug, reference 5.1).
Recipe accum_hf_bug() {
  Recipe r = fp32();
  r.accumulation.micro_batches = 4;
  r.accumulation.normalization = LossNormalization::kMeanPerMicroBatch;
  return r;
}

constexpr RecipePreset kPresets[] = {
    {"fp32", [] { return fp32(); }, "every tensor in FP32"},
    {"bf16-amp", [] { return amp("bf16"); },
     "BF16 autocast: BF16 compute copies, GEMM inputs, outputs and gradients; FP32 master weights and optimizer"},
    {"fp16-amp", [] { return fp16_amp(LossScaleMode::kDynamic); },
     "FP16 autocast with dynamic loss scaling (GradScaler defaults)"},
    {"fp16-amp-static", [] { return fp16_amp(LossScaleMode::kStatic, 1024.0); },
     "FP16 autocast with a static loss scale of 1024"},
    {"fp16-noscale", [] { return fp16_amp(LossScaleMode::kNone); },
     "FP16 autocast without loss scaling (small gradients flush to zero)"},
    {"bf16-pure", [] { return pure_bf16(UpdateRounding::kNearestEven); },
     "BF16 weights, optimizer state and updates, no master copy, nearest rounding"},
    {"bf16-pure-sr", [] { return pure_bf16(UpdateRounding::kStochastic); },
     "bf16-pure with stochastically rounded updates"},
    {"bf16-pure-kahan", [] { return pure_bf16(UpdateRounding::kKahan); }, "bf16-pure with Kahan-compensated updates"},
    {"fp8-delayed", [] { return scaled("e4m3", "e5m2", Scaling::kTensorDelayed, 0); },
     "FP8 GEMMs (E4M3 forward, E5M2 gradients) with delayed per-tensor scaling (TE HYBRID)"},
    {"fp8-current", [] { return scaled("e4m3", "e5m2", Scaling::kTensorCurrent, 0); },
     "FP8 GEMMs with current per-tensor scaling (TE Float8CurrentScaling)"},
    {"fp8-blockwise", [] { return fp8_blockwise(); },
     "E4M3 GEMMs with 1x128 activation and 128x128 weight scales (DeepSeek-V3)"},
    {"mxfp8", [] { return mxfp8(ScaleRule::kRceil); },
     "MXFP8 E4M3 GEMM operands, scales rounded up (TE MXFP8BlockScaling)"},
    {"mxfp8-ocp", [] { return mxfp8(ScaleRule::kFloor); }, "MXFP8 E4M3 GEMM operands, OCP's floor scale rule"},
    {"mxfp6", [] { return scaled("e2m3", "e3m2", Scaling::kMx, 32); },
     "MXFP6 GEMM operands (E2M3 forward, E3M2 gradients)"},
    {"mxfp4", [] { return scaled("e2m1", "e2m1", Scaling::kMx, 32); }, "MXFP4 E2M1 GEMM operands"},
    {"nvfp4", [] { return nvfp4(true); },
     "NVIDIA's NVFP4 recipe: SR gradients, RHT on wgrad, 16x16 weights, last 16% of layers in BF16"},
    {"nvfp4-plain", [] { return nvfp4(false); }, "NVFP4 GEMM operands with SR gradients only"},
    {"ddp8-bf16-ring", [] { return ddp8_bf16(AllReduceAlgorithm::kRing); },
     "bf16-amp on 8 workers, BF16 ring all-reduce (NCCL)"},
    {"ddp8-bf16-tree", [] { return ddp8_bf16(AllReduceAlgorithm::kTree); },
     "bf16-amp on 8 workers, BF16 tree all-reduce"},
    {"ddp8-bf16-fp32acc", [] { return ddp8_bf16(AllReduceAlgorithm::kFp32Accumulate); },
     "bf16-amp on 8 workers, BF16 buckets summed in FP32"},
    {"accum16-bf16-buffer", [] { return accum16_bf16(BufferRounding::kNearestEven); },
     "bf16-amp, 16 micro-batches summed in a BF16 buffer"},
    {"accum16-bf16-sr", [] { return accum16_bf16(BufferRounding::kStochastic); },
     "accum16-bf16-buffer with stochastic rounding"},
    {"accum16-bf16-kahan", [] { return accum16_bf16(BufferRounding::kKahan); },
     "accum16-bf16-buffer with Kahan compensation"},
    {"accum-hf-bug", [] { return accum_hf_bug(); },
     "FP32, 4 micro-batches, loss averaged per micro-batch (the 2024 Hugging Face bug)"},
    {"ddp8-bn-local", [] { return ddp8_bn(BatchNormStats::kWorker); },
     "FP32 on 8 workers, BatchNorm statistics per worker"},
    {"ddp8-bn-sync", [] { return ddp8_bn(BatchNormStats::kSync); }, "FP32 on 8 workers, SyncBatchNorm statistics"},
};

}  // namespace

std::span<const RecipePreset> recipe_presets() { return kPresets; }

const std::vector<std::string>& recipe_preset_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const RecipePreset& p : kPresets) v.emplace_back(p.name);
    return v;
  }();
  return kNames;
}

std::string recipe_presets_doc() {
  size_t w = 0;
  for (const RecipePreset& p : kPresets) w = std::max(w, p.name.size());
  std::string out;
  for (const RecipePreset& p : kPresets) out += fmt::format("  {:<{}}  {}\n", p.name, w, p.doc);
  return out;
}

Recipe recipe_preset(std::string_view name) {
  const auto it = std::ranges::find(kPresets, name, &RecipePreset::name);
  if (it == std::end(kPresets)) {
    std::string known;
    for (const auto& k : recipe_preset_names()) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument(fmt::format("unknown recipe '{}'; known recipes: {}", name, known));
  }
  Recipe r = it->build();
  r.name = r.preset = std::string(name);
  apply_block_recipe(r);
  return r;
}

}  // namespace precsim

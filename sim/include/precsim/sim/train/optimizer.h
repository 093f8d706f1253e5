// Optimizers as one flat loop over the parameters (llm.c style): SGD with momentum and AdamW with
// decoupled weight decay, PyTorch's operation for operation; a learning-rate schedule with linear
// warm-up and cosine decay. The update is computed in the element type T (FP32 opmath for a
// variant); rounding the states and the new weights into their formats is the caller's (the
// recipe's) business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace precsim {

enum class OptimizerKind : uint8_t { kSgd, kAdamW };
std::string_view to_string(OptimizerKind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;  // "sgd" | "adamw" in JSON
  double lr = 1e-3;
  double momentum = 0.9;       // sgd (PyTorch: dampening 0, no Nesterov; the first step copies g)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  double weight_decay = 0.0;   // sgd: added to the gradient; adamw: decoupled, w *= 1 - lr wd
  double clip_norm = 0.0;      // global gradient-norm clipping after unscaling; 0: off
  int warmup_steps = 0;        // linear warm-up from lr / warmup_steps
  bool cosine = false;         // cosine decay from the end of warm-up to min_lr_ratio lr at the last step
  double min_lr_ratio = 0.0;
};

double learning_rate(const OptimizerConfig& c, int64_t step, int64_t total_steps);

// w_new[i]: w[i] after one step of c with gradient g[i], computed in T with the operation
// sequence of PyTorch's single-tensor SGD and AdamW on x86-64 and CUDA, whose vectorised lerp,
// addcmul and add-with-alpha fuse their multiply-add (so the FP32 step equals torch.optim's bit for
// bit, given a correctly rounded square root: tests/python/test_torch_optim.py); m, v are updated
// in place (v unused by SGD). `t` counts optimizer steps from 1 (Adam bias correction; SGD's first
// step initialises the momentum).
template <class T>
void optimizer_update(T* w_new, T* m, T* v, const T* w, const T* g, size_t n, const OptimizerConfig& c, double lr,
                      int64_t t);


}  // namespace precsim

// A recipe's memory per worker (runner.h's memory_estimate): weights, master copy, gradients,
// optimizer states, accumulation buffer, block-scale overhead and the stored activations.
#include "precsim/sim/experiment/runner.h"

namespace precsim {
namespace {

// The per-worker breakdown around the stored activations of one batch and of one micro-batch.
MemoryEstimate memory_breakdown(const Recipe& r, size_t params, const OptimizerConfig& o, double act, double micro_act) {
  const double n = double(params);
  auto bytes = [](const Format& f, double count) { return count * f.bits() / 8.0; };
  double scale_overhead = 0;
  for (const GemmSpec* g : {&r.forward, &r.dgrad, &r.wgrad})
    for (const OperandSpec* op : {&g->a, &g->b})
      if (op->scaling == Scaling::kMx) scale_overhead += 1.0 / op->block;          // one E8M0 byte per block
      else if (op->scaling == Scaling::kNvfp4) scale_overhead += 1.0 / 16;         // one E4M3 byte per 16
      else if (op->scaling == Scaling::kRowwise || op->scaling == Scaling::kBlock2d) scale_overhead += 4.0 / op->block;
  const double weights = bytes(r.weights.format, n);
  const double master = r.has_master() ? bytes(r.master_weights->format, n) : 0.0;
  const double kahan = !r.has_master() && r.update_rounding == UpdateRounding::kKahan ? bytes(r.weights.format, n) : 0.0;
  const double grads = bytes(r.weight_grads.format, n);
  const double states = bytes(r.optimizer_state.format, n) * (o.kind == OptimizerKind::kAdamW ? 2 : 1);
  // One worker's accumulation buffer beside the gradients (and its compensation), when N > 1.
  const AccumulationSpec& a = r.accumulation;
  const double accum = a.micro_batches > 1 ? bytes(a.buffer_format, n) * (a.rounding == BufferRounding::kKahan ? 2 : 1) : 0.0;
  // Per worker: everything is replicated, activations are those of one micro-batch.
  const double total = weights + master + kahan + grads + states + accum + micro_act;
  return {weights, master, kahan, grads, states, accum, act, micro_act, scale_overhead / 6.0, total};
}

int split_parts(const Recipe& r) { return r.parallel.workers * r.accumulation.micro_batches; }

}  // namespace

MemoryEstimate memory_estimate(const Recipe& r, const MlpLayout& l, const OptimizerConfig& o, int batch) {
  // Stored activations of one batch: every layer's input, linear output and activation output.
  double acts = 0;
  for (const auto& s : l.layers) acts += double(batch) * (s.in + s.out + (s.hidden ? s.out : 0) + (s.layernorm || s.batchnorm ? s.out : 0));
  const double act_bytes = r.activations.format.bits() / 8.0;
  // Rows are the only batch-dependent factor.
  return memory_breakdown(r, l.param_count, o, acts * act_bytes, acts / split_parts(r) * act_bytes);
}

MemoryEstimate memory_estimate(const Recipe& r, const TransformerLayout& l, const OptimizerConfig& o, int batch) {
  const double act = r.activations.format.bits() / 8.0, score = r.attention.scores.format.bits() / 8.0;
  const double norm = r.autocast ? 4.0 : act;  // layer_norm is on autocast's FP32 list
  return memory_breakdown(r, l.param_count, o, transformer_activation_bytes(l, batch, act, norm, score),
                          transformer_activation_bytes(l, batch / split_parts(r), act, norm, score));
}

}  // namespace precsim

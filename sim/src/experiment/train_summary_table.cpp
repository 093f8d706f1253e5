// The variant table of a train run, the FP64 reference first, and its legend.
#include <fmt/format.h>

#include <algorithm>

#include "precsim/sim/experiment/train_findings.h"

namespace precsim {
namespace {

// A loss cell: the mean, and with several seeds "± half-width" of its 95% interval.
std::string loss_cell(const SeedMean& m, const char* spec) {
  std::string c = fmt::format(fmt::runtime(spec), m.mean);
  if (m.ci95) c += fmt::format(" ±{:.2g}", ((*m.ci95)[1] - (*m.ci95)[0]) / 2);
  return c;
}

std::string diverged_cell(const VariantRow& r, int seeds) {
  if (r.diverged_seeds == 0) return "-";
  if (r.diverged_at) return std::to_string(*r.diverged_at);
  return fmt::format("{} of {}", r.diverged_seeds, seeds);
}

size_t name_width(const TrainSummary& s) {
  size_t w = 16;  // "fp64 (reference)"
  for (const auto& r : s.variants) w = std::max(w, r.name.size());
  return w;
}

}  // namespace

std::string train_summary_table(const TrainSummary& s) {
  const bool ci = std::any_of(s.variants.begin(), s.variants.end(),
                              [](const VariantRow& r) { return r.final_loss.ci95.has_value(); });
  const int w = ci ? 20 : 10;
  const size_t nw = name_width(s);
  const std::string acc = s.classification ? fmt::format(" {:>10}", "acc") : "";
  std::string t =
      fmt::format("{:<{}} {:>{}} {:>{}} {:>{}}{} {:>10} {:>10} {:>9} {:>9} {:>8} {:>9}\n", "variant", nw, "final", w,
                  "heldout", w, "gap", w, acc, "local_err", "drift/cf", "underflow", "stagnant", "skipped", "diverged");
  const std::string ref_acc = s.classification ? fmt::format(" {:>10.4f}", s.ref_heldout_accuracy) : "";
  t += fmt::format("{:<{}} {:>{}.4g} {:>{}.4g} {:>{}}{} {:>10} {:>10} {:>9} {:>9} {:>8} {:>9}\n", "fp64 (reference)",
                   nw, s.ref_final_loss, w, s.ref_heldout_loss, w, "-", w, ref_acc, "-", "-", "-", "-", "-", "-");
  for (const auto& r : s.variants) {
    const std::string a = s.classification ? fmt::format(" {:>10.4f}", r.heldout_accuracy) : "";
    t += fmt::format("{:<{}} {:>{}} {:>{}} {:>{}}{} {:>10.3g} {:>10.3g} {:>9.3g} {:>9.3g} {:>8.0f} {:>9}\n", r.name, nw,
                     loss_cell(r.final_loss, "{:.4g}"), w, loss_cell(r.heldout_loss, "{:.4g}"), w,
                     loss_cell(r.loss_gap, "{:+.3g}"), w, a, r.local_grad_rel_err, r.drift_over_chaos_floor,
                     r.underflow_fraction, r.stagnation_fraction, r.skipped_steps, diverged_cell(r, s.seeds));
  }
  return t;
}

std::string train_summary_legend(const TrainSummary& s) {
  std::string l = "legend (docs/reference/metrics.md defines each):\n";
  l += s.seeds > 1
           ? fmt::format("  final      training loss at the last step, mean over {} seeds ± half its 95% interval\n",
                         s.seeds)
           : "  final      training loss at the last step (1 seed: no interval)\n";
  l += "  heldout    loss on the held-out set after the last step\n";
  l += "  gap        final minus the FP64 reference's final loss (same data, initial weights and batches)\n";
  if (s.classification) l += "  acc        held-out accuracy\n";
  l += "  local_err  gradient error at the reference's weights, |g - g_ref| / |g_ref|, mean over shadow steps\n";
  l += "  drift/cf   distance of the weights from the reference's, over that of an FP64 run moved by one ulp\n"
       "             at the start (the chaos floor): near 1, no more drift than chaos alone\n";
  l += "  underflow  fraction of non-zero gradient values flushed to zero\n";
  l += "  stagnant   fraction of intended weight updates that left the stored weight unchanged\n";
  l += "  skipped    steps the loss scaler skipped on inf/NaN gradients\n";
  l += "  diverged   first step with a non-finite or exploding loss (-: none)\n";
  return l;
}

}  // namespace precsim

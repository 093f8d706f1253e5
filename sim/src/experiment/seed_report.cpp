#include "seed_report.h"

#include <fmt/format.h>

#include "precsim/reports/report.h"
#include "precsim/sim/analysis/metrics.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/formats/block_scaling.h"

namespace precsim {
namespace {

using nlohmann::json;

const char* const kAggregated[] = {"final_loss",         "heldout_loss",       "heldout_accuracy",
                                   "loss_gap",           "heldout_loss_gap",   "heldout_accuracy_gap",
                                   "local_grad_rel_err", "local_grad_cosine",  "local_update_rel_err",
                                   "local_weight_grad_underflow", "local_split_grad_rel_err",
                                   "local_split_grad_cosine", "weight_distance", "chaos_floor",
                                   "drift_over_chaos_floor", "underflow_fraction", "stagnation_fraction",
                                   "skipped_steps",      "final_loss_scale"};

}  // namespace

double window_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

json roles_json(const RoleStats& r, const std::array<uint64_t, kRoles>& nz) {
  json j = json::object();
  for (size_t i = 0; i < kRoles; ++i) {
    const QuantStats& q = r[i];
    if (q.count == 0) continue;
    j[std::string(to_string(static_cast<Role>(i)))] = {
        {"count", q.count},
        {"nonzero_inputs", nz[i]},
        {"flushed_to_zero", q.underflow_to_zero},
        {"flush_fraction", json_number(nz[i] ? double(q.underflow_to_zero) / double(nz[i]) : 0.0)},
        {"subnormal", q.subnormal},
        {"subnormal_fraction", json_number(double(q.subnormal) / double(q.count))},
        {"inexact", q.inexact},
        {"overflow", q.overflow},
        {"saturated", q.saturated},
        {"nan", q.nan}};
  }
  return j;
}

json variant_summary_json(const VariantSummaryInput& v) {
  uint64_t gflush = 0, gnz = 0;
  for (Role r : {Role::kActivationGrads, Role::kWeightGrads}) {
    gflush += (*v.roles)[size_t(r)].underflow_to_zero;
    gnz += (*v.nonzero)[size_t(r)];
  }
  const double dist = v.weight_distance, chaos_final = v.chaos_floor;
  return {{"final_loss", json_number(v.final_loss)},
          {"heldout_loss", json_number(v.heldout_loss)},
          {"heldout_accuracy", json_number(v.heldout_accuracy)},
          {"loss_gap", json_number(v.final_loss - v.ref_final)},
          {"heldout_loss_gap", json_number(v.heldout_loss - v.ref_heldout_loss)},
          {"heldout_accuracy_gap", json_number(v.heldout_accuracy - v.ref_heldout_accuracy)},
          {"local_grad_rel_err", json_number(window_mean(*v.local_grad_err))},
          {"local_grad_cosine", json_number(window_mean(*v.local_grad_cos))},
          {"local_update_rel_err", json_number(window_mean(*v.local_update_err))},
          {"local_weight_grad_underflow", json_number(window_mean(*v.local_underflow))},
          {"local_split_grad_rel_err", json_number(window_mean(*v.split_grad_err))},
          {"local_split_grad_cosine", json_number(v.split_grad_cos->empty() ? 1.0 : window_mean(*v.split_grad_cos))},
          {"weight_distance", json_number(dist)},
          {"chaos_floor", json_number(chaos_final)},
          {"drift_over_chaos_floor", json_number(dist / chaos_final)},
          {"underflow_fraction", json_number(gnz ? double(gflush) / double(gnz) : 0.0)},
          {"stagnation_fraction", json_number(v.intended ? double(v.lost) / double(v.intended) : 0.0)},
          {"skipped_steps", v.skipped},
          {"final_loss_scale", json_number(v.final_loss_scale)},
          {"diverged_at", v.diverged_at >= 0 ? json(v.diverged_at) : json(nullptr)}};
}

json fp8_delayed_json(const RunState<float>& s) {
  json fp8 = json::array();
  for (size_t i = 0; i < s.delayed.size(); ++i)
    if (s.delayed[i]) {
      const auto& h = s.delayed[i]->history();
      fp8.push_back({{"operand", i}, {"scale", json_number(s.delayed[i]->scale())},
                     {"last_amax", json_number(h.empty() ? 0.0 : h.front())}});
    }
  return fp8;
}

json aggregate_variants(const std::vector<Recipe>& recipes, const json& runs, int seeds,
                        const std::vector<json>& memory) {
  json variants = json::array();
  for (size_t vi = 0; vi < recipes.size(); ++vi) {
    json agg = json::object(), ci = json::object();
    for (const char* key : kAggregated) {
      std::vector<double> xs;
      for (const auto& run : runs) xs.push_back(read_number(run["variants"][vi]["summary"][key]));
      const MeanCi m = mean_ci95(xs);
      agg[key] = json_number(m.mean);
      ci[key] = {json_number(m.lo), json_number(m.hi)};
    }
    json diverged = json::array();
    for (const auto& run : runs) diverged.push_back(run["variants"][vi]["summary"]["diverged_at"]);
    agg["diverged_at"] = seeds == 1 ? diverged[0] : diverged;
    json v = {{"name", recipes[vi].name},
              {"preset", recipes[vi].preset},
              {"summary", agg},
              {"split", {{"workers", recipes[vi].parallel.workers},
                         {"micro_batches", recipes[vi].accumulation.micro_batches}}}};
    v["memory_bytes"] = memory[vi];
    if (seeds > 1) v["summary_ci95"] = ci;
    variants.push_back(v);
  }
  return variants;
}

namespace {

// "-" when no seed diverged; the step with one seed; "k of n seeds" over several.
std::string diverged_cell(const json& d) {
  if (!d.is_array()) return d.is_null() ? "-" : d.dump();
  size_t k = 0;
  for (const auto& e : d) k += !e.is_null();
  return k ? fmt::format("{} of {}", k, d.size()) : "-";
}

}  // namespace

// at() rather than [] throughout: the table is also printed from a report read back from disk
// (report summary), where a missing key must throw, not read past the object.
std::string summary_table(const nlohmann::json& results) {
  // Over several seeds the loss columns carry their 95% interval as mean ± half-width.
  bool ci = false;
  for (const auto& v : results.at("variants")) ci |= v.contains("summary_ci95");
  const int w = ci ? 20 : 10;
  std::string t = fmt::format("{:<16} {:>{}} {:>{}} {:>{}} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}\n", "variant", "final",
                              w, "heldout", w, "gap", w, "acc", "local_err", "drift/cf", "underflow", "skipped", "diverged");
  for (const auto& v : results.at("variants")) {
    const auto& s = v.at("summary");
    auto num = [&](const char* k) { return read_number(s.at(k)); };
    auto loss = [&](const char* k, const char* spec) {
      std::string c = fmt::format(fmt::runtime(spec), num(k));
      if (!v.contains("summary_ci95")) return c;
      const auto& iv = v.at("summary_ci95").at(k);
      return c + fmt::format(" ±{:.2g}", (read_number(iv.at(1)) - read_number(iv.at(0))) / 2);
    };
    t += fmt::format("{:<16} {:>{}} {:>{}} {:>{}} {:>10.4f} {:>10.3g} {:>10.3g} {:>9.3g} {:>8.0f} {:>9}\n",
                     v.at("name").get<std::string>(), loss("final_loss", "{:.4g}"), w, loss("heldout_loss", "{:.4g}"), w,
                     loss("loss_gap", "{:+.3g}"), w, num("heldout_accuracy"), num("local_grad_rel_err"),
                     num("drift_over_chaos_floor"), num("underflow_fraction"), num("skipped_steps"),
                     diverged_cell(s.at("diverged_at")));
  }
  // Split variants: the error the split alone adds, and the activation memory it saves.
  bool any_split = false;
  for (const auto& v : results.at("variants"))
    any_split |= v.contains("split") && v.at("split").at("workers").get<int>() * v.at("split").at("micro_batches").get<int>() > 1;
  if (!any_split) return t;
  t += fmt::format("\n{:<20} {:>9} {:>12} {:>14} {:>14} {:>14}\n", "variant", "W x N", "split_err", "split_cosine",
                   "act_bytes_mb", "act_bytes_all");
  for (const auto& v : results.at("variants")) {
    const auto& s = v.at("summary");
    t += fmt::format("{:<20} {:>9} {:>12.3g} {:>14.8f} {:>14.0f} {:>14.0f}\n", v.at("name").get<std::string>(),
                     fmt::format("{} x {}", v.at("split").at("workers").get<int>(), v.at("split").at("micro_batches").get<int>()),
                     read_number(s.at("local_split_grad_rel_err")), read_number(s.at("local_split_grad_cosine")),
                     v.at("memory_bytes").at("activations_one_micro_batch").get<double>(),
                     v.at("memory_bytes").at("activations_one_batch").get<double>());
  }
  return t;
}

}  // namespace precsim

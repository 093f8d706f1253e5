// The JSON of a train report's results (train_results.h's structs): the one place where the
// keys and number types are chosen. Floating-point values go through json_number (non-finite
// values as strings); counts and steps stay integers, except the series' steps, written as numbers
// like the series' other values.
#include <fmt/format.h>

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "precsim/formats/block_scaling.h"
#include "precsim/reports/report.h"
#include "precsim/sim/experiment/train_results.h"

namespace precsim {
namespace {

using nlohmann::json;
using Column = std::pair<const char*, const std::vector<double>*>;

// A series as {key: [values]}, or {} when nothing was recorded (the columns have one length).
template <size_t N>
json series_json(const std::array<Column, N>& columns) {
  json j = json::object();
  if (columns[0].second->empty()) return j;
  for (const auto& [key, values] : columns) {
    json& col = j[key] = json::array();
    for (double v : *values) col.push_back(json_number(v));
  }
  return j;
}

std::array<Column, 5> columns(const ReferenceSeries& s) {
  return {{{"step", &s.step}, {"loss", &s.loss}, {"chaos_loss", &s.chaos_loss},
           {"chaos_weight_distance", &s.chaos_weight_distance}, {"grad_norm", &s.grad_norm}}};
}

std::array<Column, 3> columns(const EvalSeries& s) {
  return {{{"step", &s.step}, {"heldout_loss", &s.heldout_loss}, {"heldout_accuracy", &s.heldout_accuracy}}};
}

std::array<Column, 9> columns(const VariantSeries& s) {
  return {{{"step", &s.step}, {"loss", &s.loss}, {"loss_gap", &s.loss_gap}, {"weight_distance", &s.weight_distance},
           {"drift_over_chaos_floor", &s.drift_over_chaos_floor},
           {"grad_cosine_vs_reference", &s.grad_cosine_vs_reference}, {"loss_scale", &s.loss_scale},
           {"skipped_steps", &s.skipped_steps}, {"stagnation", &s.stagnation}}};
}

std::array<Column, 7> columns(const LocalSeries& s) {
  return {{{"step", &s.step}, {"grad_rel_err", &s.grad_rel_err}, {"grad_cosine", &s.grad_cosine},
           {"update_rel_err", &s.update_rel_err},
           {"weight_grad_underflow_vs_reference", &s.weight_grad_underflow_vs_reference},
           {"split_grad_rel_err", &s.split_grad_rel_err}, {"split_grad_cosine", &s.split_grad_cosine}}};
}

std::array<Column, 5> columns(const TwinSeries& s) {
  return {{{"step", &s.step}, {"loss", &s.loss}, {"loss_diff", &s.loss_diff}, {"weight_rel_err", &s.weight_rel_err},
           {"loss_scale", &s.loss_scale}}};
}

template <class S>
json series_json(const S& s) {
  return series_json(columns(s));
}

// Keys l<block>_<statistic>, as docs/reference/metrics.md lists them.
json layers_json(const LayerSeries& s) {
  static const char* const kInputs[] = {"qkv", "proj", "fc", "fcproj"};
  json j = json::object();
  if (s.step.empty()) return j;
  j["step"] = s.step;
  auto put = [&](size_t l, const std::string& key, const std::vector<double>& values) {
    json& col = j[fmt::format("l{}_{}", l, key)] = json::array();
    for (double v : values) col.push_back(json_number(v));
  };
  for (size_t l = 0; l < s.blocks.size(); ++l) {
    const BlockSeries& b = s.blocks[l];
    put(l, "attn_logit_amax", b.attn_logit_amax);
    put(l, "attn_logit_overflow_fraction", b.attn_logit_overflow_fraction);
    for (size_t i = 0; i < 4; ++i) {
      put(l, fmt::format("{}_input_max_over_rms", kInputs[i]), b.input_max_over_rms[i]);
      put(l, fmt::format("{}_input_fp8_scale", kInputs[i]), b.input_fp8_scale[i]);
    }
  }
  return j;
}

json step_or_null(const std::optional<int64_t>& s) { return s ? json(*s) : json(nullptr); }

// Per role with any rounding: counts, flush and subnormal fractions (docs/reference/metrics.md).
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

json twin_json(const TwinResults& t) {
  return {{"name", t.name},
          {"summary", {{"last_loss", json_number(t.last_loss)},
                       {"max_abs_loss_diff", json_number(t.max_abs_loss_diff)},
                       {"max_weight_rel_err", json_number(t.max_weight_rel_err)},
                       {"final_weight_rel_err", json_number(t.final_weight_rel_err)},
                       {"skipped_steps", t.skipped_steps},
                       {"diverged_at", step_or_null(t.diverged_at)}}},
          {"series", series_json(t.series)},
          {"calls", t.calls}};
}

json variant_run_json(const VariantRunResults& v) {
  json histograms = json::array(), fp8 = json::array();
  for (const GradHistograms& h : v.histograms)
    histograms.push_back({{"step", h.step}, {"activation_grads", h.activation_grads},
                          {"weight_grads_unscaled", h.weight_grads_unscaled}});
  for (const Fp8DelayedScale& d : v.fp8_delayed_scales)
    fp8.push_back({{"operand", d.operand}, {"scale", json_number(d.scale)}, {"last_amax", json_number(d.last_amax)}});
  json j = {{"name", v.name},
            {"summary", variant_summary_json(v.summary)},
            {"roles", roles_json(v.roles, v.nonzero)},
            {"series", series_json(v.series)},
            {"local", series_json(v.local)},
            {"evals", series_json(v.evals)},
            {"histograms", histograms},
            {"fp8_delayed_scales", fp8}};
  if (v.layers && !v.layers->step.empty()) j["layers"] = layers_json(*v.layers);
  if (v.backend) j["backend"] = twin_json(*v.backend);
  return j;
}

json seed_json(const SeedResults& s) {
  const ReferenceResults& r = s.reference;
  json vars = json::array();
  for (const VariantRunResults& v : s.variants) vars.push_back(variant_run_json(v));
  return {{"seed", s.seed},
          {"steps_completed", s.steps_completed},
          {"reference", {{"final_loss", json_number(r.final_loss)},
                         {"last_loss", json_number(r.last_loss)},
                         {"initial_loss", json_number(r.initial_loss)},
                         {"heldout_loss", json_number(r.heldout_loss)},
                         {"heldout_accuracy", json_number(r.heldout_accuracy)},
                         {"chaos_floor", json_number(r.chaos_floor)},
                         {"series", series_json(r.series)},
                         {"evals", series_json(r.evals)}}},
          {"variants", vars}};
}

// One seed: its divergence step; several: the list over seeds (as the summary_ci95 appears).
json aggregate_json(const VariantAggregate& v, int seeds) {
  json agg = json::object(), ci = json::object();
  for (size_t k = 0; k < kSummaryNumbers; ++k) {
    agg[kSummaryNumberNames[k]] = json_number(v.summary[k].mean);
    ci[kSummaryNumberNames[k]] = {json_number(v.summary[k].lo), json_number(v.summary[k].hi)};
  }
  json diverged = json::array();
  for (const auto& d : v.diverged_at) diverged.push_back(step_or_null(d));
  agg["diverged_at"] = seeds == 1 ? diverged[0] : diverged;
  json j = {{"name", v.name},
            {"preset", v.preset},
            {"summary", agg},
            {"split", {{"workers", v.workers}, {"micro_batches", v.micro_batches}}},
            {"memory_bytes", v.memory_bytes}};
  if (seeds > 1) j["summary_ci95"] = ci;
  return j;
}

}  // namespace

json variant_summary_json(const VariantSummary& s) {
  const std::array<double, kSummaryNumbers> x = summary_numbers(s);
  json j = json::object();
  for (size_t k = 0; k < kSummaryNumbers; ++k) j[kSummaryNumberNames[k]] = json_number(x[k]);
  j["skipped_steps"] = s.skipped_steps;
  j["diverged_at"] = step_or_null(s.diverged_at);
  return j;
}

json logged_step_json(const VariantSeries& s, uint64_t seed, int64_t step, const std::string& variant) {
  json rec = {{"seed", seed}, {"step", step}, {"variant", variant}};
  for (const auto& [key, values] : columns(s))
    if (std::string_view(key) != "step") rec[key] = json_number(values->back());
  return rec;
}

void to_json(json& j, const MemoryEstimate& m) {
  j = {{"weights", m.weights},
       {"master_weights", m.master_weights},
       {"kahan_compensation", m.kahan_compensation},
       {"gradients", m.gradients},
       {"optimizer_state", m.optimizer_state},
       {"accumulation_buffer", m.accumulation_buffer},
       {"activations_one_batch", m.activations_one_batch},
       {"activations_one_micro_batch", m.activations_one_micro_batch},
       {"gemm_operand_scales_per_element_bytes", m.gemm_operand_scales_per_element_bytes},
       {"total", m.total}};
}

json train_results_json(const TrainResults& r) {
  json variants = json::array(), runs = json::array();
  for (const VariantAggregate& v : r.variants) variants.push_back(aggregate_json(v, r.seeds));
  for (const SeedResults& s : r.runs) runs.push_back(seed_json(s));
  return {{"parameters", r.parameters}, {"variants", variants}, {"runs", runs}};
}

}  // namespace precsim

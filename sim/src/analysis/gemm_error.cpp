#include "precsim/sim/analysis/gemm_error.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "precsim/formats/rounding.h"
#include "precsim/reports/report.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/core/random.h"

namespace precsim {

std::vector<int64_t> sample_outputs(int64_t m, int64_t n, int64_t max_samples, uint64_t seed) {
  const int64_t total = m * n;
  std::vector<int64_t> idx;
  if (total <= max_samples) {
    idx.resize(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) idx[i] = i;
    return idx;
  }
  std::set<int64_t> chosen;
  for (uint64_t draw = 0; static_cast<int64_t>(chosen.size()) < max_samples; ++draw)
    chosen.insert(std::min(total - 1, static_cast<int64_t>(uniform01(seed, 0x5a3e, draw) * static_cast<double>(total))));
  return {chosen.begin(), chosen.end()};
}

ExactSample exact_gemm_sample(const GemmArgs& g, const float* a, const float* b,
                              const std::vector<int64_t>& index, const Format& out) {
  const int64_t lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k);
  const int64_t ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n);
  const int64_t a_rs = g.trans_a ? 1 : lda, a_ks = g.trans_a ? lda : 1;
  const int64_t b_ks = g.trans_b ? 1 : ldb, b_cs = g.trans_b ? ldb : 1;
  const Format fp64 = format_by_name("fp64");
  ExactSample s;
  s.index = index;
  s.exact.resize(index.size());
  s.exact_out.resize(index.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t t = 0; t < index.size(); ++t) {
    const int64_t i = index[t] / g.n, j = index[t] % g.n;
    LongAccumulator acc;
    for (int64_t p = 0; p < g.k; ++p) acc.add_product(a[i * a_rs + p * a_ks], b[p * b_ks + j * b_cs]);
    s.exact[t] = decode(fp64, acc.round(fp64).code);
    s.exact_out[t] = decode(out, acc.round(out).code);
  }
  return s;
}

GemmErrorStats measure_error(const ExactSample& s, const double* c, const Format& out) {
  GemmErrorStats e;
  double num = 0, den = 0, sum_rel = 0, sum_ulp = 0;
  uint64_t rel_count = 0, ulp_count = 0;
  for (size_t t = 0; t < s.index.size(); ++t) {
    const double got = c[s.index[t]], want = s.exact[t];
    ++e.count;
    if (!std::isfinite(want)) {
      ++e.exact_nonfinite;
      continue;
    }
    if (!std::isfinite(got)) {
      ++e.nonfinite;
      continue;
    }
    const double abs_err = std::fabs(got - want);
    e.max_abs = std::max(e.max_abs, abs_err);
    num += abs_err * abs_err;
    den += want * want;
    if (want == 0) {
      ++e.exact_zero;
    } else {
      const double rel = abs_err / std::fabs(want);
      e.max_rel = std::max(e.max_rel, rel);
      sum_rel += rel;
      ++rel_count;
    }
    const uint64_t cg = encode(out, got).code, cw = encode(out, s.exact_out[t]).code;
    if (std::isfinite(decode(out, cg)) && std::isfinite(decode(out, cw))) {
      const int64_t u = std::llabs(ordinal(out, cg) - ordinal(out, cw));
      e.max_ulp = std::max(e.max_ulp, u);
      sum_ulp += static_cast<double>(u);
      ++ulp_count;
      size_t b = 0;
      while (b < kUlpBucketEdges.size() && u > kUlpBucketEdges[b]) ++b;
      ++e.ulp_hist[b];
    }
  }
  e.mean_rel = rel_count ? sum_rel / static_cast<double>(rel_count) : 0;
  e.mean_ulp = ulp_count ? sum_ulp / static_cast<double>(ulp_count) : 0;
  e.normwise = den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0);
  if (e.exact_nonfinite == e.count && e.count > 0)
    e.max_rel = e.mean_rel = e.max_abs = e.normwise = e.mean_ulp = std::nan("");
  return e;
}

nlohmann::json to_json(const GemmErrorStats& e) {
  nlohmann::json hist = nlohmann::json::array();
  for (size_t b = 0; b < e.ulp_hist.size(); ++b) {
    const std::string label = b < kUlpBucketEdges.size() ? fmt::format("<={}", kUlpBucketEdges[b])
                                                         : fmt::format(">{}", kUlpBucketEdges.back());
    hist.push_back({{"ulps", label}, {"count", e.ulp_hist[b]}});
  }
  nlohmann::json j = {{"samples", e.count},
                      {"exact_zero", e.exact_zero},
                      {"nonfinite", e.nonfinite},
                      {"max_rel_error", json_number(e.max_rel)},
                      {"mean_rel_error", json_number(e.mean_rel)},
                      {"max_abs_error", json_number(e.max_abs)},
                      {"normwise_error", json_number(e.normwise)},
                      {"max_ulp_error", e.max_ulp},
                      {"mean_ulp_error", json_number(e.mean_ulp)},
                      {"ulp_histogram", hist}};
  // Only where there is something to count, so that reports of finite operands keep their digests.
  if (e.exact_nonfinite) j["exact_nonfinite"] = e.exact_nonfinite;
  return j;
}

}  // namespace precsim

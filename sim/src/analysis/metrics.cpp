#include "precsim/sim/analysis/metrics.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "precsim/reports/report.h"

namespace precsim {

double norm2(std::span<const double> a) {
  double s = 0;
  for (double v : a) s += v * v;
  return std::sqrt(s);
}

double rel_error(std::span<const double> a, std::span<const double> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num) / std::sqrt(den);
}

double cosine(std::span<const double> a, std::span<const double> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  if (aa == 0 && bb == 0) return 1.0;
  if (aa == 0 || bb == 0) return 0.0;
  return ab / (std::sqrt(aa) * std::sqrt(bb));
}

double underflow_vs_reference(std::span<const double> a, std::span<const double> ref) {
  uint64_t nz = 0, lost = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] == 0) continue;
    ++nz;
    lost += a[i] == 0;
  }
  return nz ? double(lost) / double(nz) : 0.0;
}

MeanCi mean_ci95(std::span<const double> x) {
  MeanCi r;
  if (x.empty()) return r;
  double s = 0;
  for (double v : x) s += v;
  r.mean = s / double(x.size());
  r.lo = r.hi = r.mean;
  if (x.size() < 2 || !std::isfinite(r.mean)) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  const double sd = std::sqrt(ss / double(x.size() - 1));
  const boost::math::students_t t(double(x.size() - 1));
  const double half = boost::math::quantile(boost::math::complement(t, 0.025)) * sd / std::sqrt(double(x.size()));
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

nlohmann::json exponent_histogram(std::span<const double> x, const Format& f) {
  std::map<int, uint64_t> h;
  uint64_t zeros = 0, nonfinite = 0;
  for (double v : x) {
    if (v == 0) ++zeros;
    else if (!std::isfinite(v)) ++nonfinite;
    else ++h[std::ilogb(v)];
  }
  nlohmann::json bins = nlohmann::json::array();
  for (const auto& [e, c] : h) bins.push_back({e, c});
  return {{"bins", bins},
          {"zeros", zeros},
          {"nonfinite", nonfinite},
          {"format", f.name},
          {"format_min_exponent", std::ilogb(f.min_subnormal())},
          {"format_min_normal_exponent", std::ilogb(f.min_normal())},
          {"format_max_exponent", std::ilogb(f.max_finite())}};
}

}  // namespace precsim

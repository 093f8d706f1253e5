#include "precsim/sim/data/distributions.h"

#include <cmath>
#include <cstdlib>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/spec.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

struct DistSpec {
  const char* name;
  DistKind kind;
  std::vector<std::pair<const char*, double>> defaults;
};

const std::vector<DistSpec>& specs() {
  static const std::vector<DistSpec> s = {
      {"normal", DistKind::kNormal, {{"mean", 0}, {"std", 1}}},
      {"laplace", DistKind::kLaplace, {{"loc", 0}, {"scale", 1}}},
      {"uniform", DistKind::kUniform, {{"low", -1}, {"high", 1}}},
      {"lognormal", DistKind::kLognormal, {{"mu", 0}, {"sigma", 1}}},
      {"student-t", DistKind::kStudentT, {{"df", 3}, {"scale", 1}}},
  };
  return s;
}

const char* const kAllowed = kDistributionSpecs;

double parse_double(std::string_view text, const std::string& what) {
  const std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end || !std::isfinite(v))
    throw std::invalid_argument(what + ": '" + t + "' is not a finite number");
  return v;
}

// Streams: one for the draw, one for the outlier choice.
constexpr uint64_t kDrawStream = 0x6469737400000000ULL;
constexpr uint64_t kOutlierStream = 0x6f75746c00000000ULL;

}  // namespace

std::string_view to_string(DistKind k) {
  for (const auto& s : specs())
    if (s.kind == k) return s.name;
  return "?";
}

Distribution parse_distribution(std::string_view spec) {
  // Parameters are separated by ',' as well as ':' ("uniform:low=0,high=1"), as they always were.
  const Spec parsed = parse_spec(spec, {.what = "distribution", .separators = ":,"});
  const std::string& name = parsed.name;
  Distribution d;
  const DistSpec* found = nullptr;
  for (const auto& s : specs())
    if (name == s.name) found = &s;
  if (!found) throw std::invalid_argument("distribution '" + name + "' is unknown; allowed: " + kAllowed);
  if (spec.size() > name.size() && spec[name.size()] != ':')
    throw parsed.error("expected ':' after the name " + name);
  d.kind = found->kind;
  for (const auto& [k, v] : found->defaults) d.params[k] = v;
  for (const SpecOption& o : parsed.options) {
    if (o.is_flag() || !d.params.count(o.key))
      throw parsed.error(o, "'" + o.text + "' is not a parameter of " + found->name + "; allowed: " + kAllowed);
    d.params[o.key] = parse_double(*o.value, "distribution '" + std::string(spec) + "' " + o.key);
  }
  auto need = [&](bool ok, const std::string& why) {
    if (!ok) throw std::invalid_argument("distribution '" + std::string(spec) + "': " + why);
  };
  const auto& p = d.params;
  switch (d.kind) {
    case DistKind::kNormal: need(p.at("std") > 0, "std must be > 0"); break;
    case DistKind::kLaplace: need(p.at("scale") > 0, "scale must be > 0"); break;
    case DistKind::kUniform: need(p.at("low") < p.at("high"), "low must be below high"); break;
    case DistKind::kLognormal: need(p.at("sigma") > 0, "sigma must be > 0"); break;
    case DistKind::kStudentT: need(p.at("df") > 0 && p.at("scale") > 0, "df and scale must be > 0"); break;
  }
  return d;
}

void parse_outliers(std::string_view spec, Distribution& d) {
  const size_t comma = spec.find(',');
  if (comma == std::string_view::npos)
    throw std::invalid_argument("--outliers '" + std::string(spec) + "': expected FRACTION,MAGNITUDE (e.g. 0.001,100)");
  const double f = parse_double(spec.substr(0, comma), "--outliers fraction");
  const double m = parse_double(spec.substr(comma + 1), "--outliers magnitude");
  if (f < 0 || f > 1)
    throw std::invalid_argument("--outliers fraction " + std::string(spec.substr(0, comma)) + " is outside [0, 1]");
  d.outlier_fraction = f;
  d.outlier_magnitude = m;
}

void generate(const Distribution& d, std::span<float> out, uint64_t seed) {
  // Parameters out of the map once: (mean, std), (loc, scale), (low, high), (mu, sigma), (df, scale).
  double p1 = 0, p2 = 0;
  for (const auto& sp : specs())
    if (sp.kind == d.kind) p1 = d.params.at(sp.defaults[0].first), p2 = d.params.at(sp.defaults[1].first);
  const int64_t n = static_cast<int64_t>(out.size());
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 14))
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t k = static_cast<uint64_t>(i);
    double x = 0;
    switch (d.kind) {
      case DistKind::kNormal:
        x = p1 + p2 * standard_normal(seed, kDrawStream, k);
        break;
      case DistKind::kLaplace: {
        const double u = uniform01(seed, kDrawStream, k) - 0.5;
        x = p1 - p2 * std::copysign(std::log1p(-2 * std::fabs(u)), u);
        break;
      }
      case DistKind::kUniform: {
        const double u = uniform01(seed, kDrawStream, k);
        x = p1 + (p2 - p1) * u;
        break;
      }
      case DistKind::kLognormal:
        x = std::exp(p1 + p2 * standard_normal(seed, kDrawStream, k));
        break;
      case DistKind::kStudentT: {
        // Bailey (1994): T = sqrt(df (U^(-2/df) - 1)) cos(2 pi V) is Student-t with df degrees.
        const double df = p1;
        const double u = uniform01(seed, kDrawStream, 2 * k), v = uniform01(seed, kDrawStream, 2 * k + 1);
        x = p2 * std::sqrt(df * (std::pow(u, -2.0 / df) - 1)) * std::cos(2 * std::numbers::pi * v);
        break;
      }
    }
    if (d.outlier_fraction > 0 && uniform01(seed, kOutlierStream, k) < d.outlier_fraction) x *= d.outlier_magnitude;
    out[i] = static_cast<float>(x);
  }
}

}  // namespace precsim

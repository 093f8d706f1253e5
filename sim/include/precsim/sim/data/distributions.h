// Generated test tensors: named distributions with parameters and optional outliers, drawn from
// the keyed generators of random.h, so element i depends only on (seed, i).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace precsim {

enum class DistKind : uint8_t { kNormal, kLaplace, kUniform, kLognormal, kStudentT };

struct Distribution {
  DistKind kind = DistKind::kNormal;
  // Parameters by name, every one filled in (defaults included):
  //   normal mean=0 std=1; laplace loc=0 scale=1; uniform low=-1 high=1;
  //   lognormal mu=0 sigma=1 (positive values); student-t df=3 scale=1.
  std::map<std::string, double> params;
  double outlier_fraction = 0;   // share of elements multiplied by outlier_magnitude
  double outlier_magnitude = 1;
};

// The distributions and their parameters, for messages and --dist help texts.
inline constexpr const char* kDistributionSpecs =
    "normal[:mean=M,std=S], laplace[:loc=L,scale=B], uniform[:low=A,high=B], lognormal[:mu=M,sigma=S], "
    "student-t[:df=N,scale=S] (defaults: mean 0, std 1; loc 0, scale 1; low -1, high 1; mu 0, sigma 1; df 3, scale 1)";

// "normal", "normal:std=0.02", "student-t:df=2.5,scale=0.1" (the grammar of formats/spec.h;
// parameters separated by ',' or ':'). Throws std::invalid_argument naming the bad part and the
// allowed names and parameters.
Distribution parse_distribution(std::string_view spec);
// "fraction,magnitude", e.g. "0.001,100": fraction in [0, 1], magnitude finite.
void parse_outliers(std::string_view spec, Distribution& d);
std::string_view to_string(DistKind);

// Element i: a draw from the distribution (inverse CDF or Box-Muller / Bailey's polar method on
// keyed uniforms), multiplied by outlier_magnitude when a separate keyed uniform is below
// outlier_fraction. Any thread count gives the same values.
void generate(const Distribution& d, std::span<float> out, uint64_t seed);

}  // namespace precsim

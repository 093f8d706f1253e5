#include "precsim/formats/quant_options.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace precsim {
namespace {

constexpr std::array<std::pair<Rounding, std::string_view>, 7> kRoundingNames{{
    {Rounding::kNearestEven, "nearest-even"},
    {Rounding::kNearestAway, "nearest-away"},
    {Rounding::kTowardZero, "toward-zero"},
    {Rounding::kUp, "up"},
    {Rounding::kDown, "down"},
    {Rounding::kOdd, "odd"},
    {Rounding::kStochastic, "stochastic"},
}};

}  // namespace

void QuantStats::add(uint32_t s) {
  ++count;
  inexact += (s & kInexact) != 0;
  underflow_to_zero += (s & kUnderflowToZero) != 0;
  subnormal += (s & kSubnormalResult) != 0;
  overflow += (s & kOverflow) != 0;
  saturated += (s & kSaturated) != 0;
  nan += (s & (kNanResult | kInvalid)) != 0;
}

QuantStats& QuantStats::operator+=(const QuantStats& o) {
  count += o.count;
  inexact += o.inexact;
  underflow_to_zero += o.underflow_to_zero;
  subnormal += o.subnormal;
  overflow += o.overflow;
  saturated += o.saturated;
  nan += o.nan;
  return *this;
}

std::string_view to_string(Rounding r) {
  for (const auto& [v, n] : kRoundingNames)
    if (v == r) return n;
  return "?";
}

std::string_view to_string(Overflow o) { return o == Overflow::kIeee ? "ieee" : "saturate"; }

Rounding parse_rounding(std::string_view s) {
  for (const auto& [v, n] : kRoundingNames)
    if (n == s) return v;
  std::string allowed;
  for (const auto& [v, n] : kRoundingNames) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  throw std::invalid_argument("unknown rounding '" + std::string(s) + "'; allowed: " + allowed);
}

Overflow parse_overflow(std::string_view s) {
  if (s == "ieee") return Overflow::kIeee;
  if (s == "saturate") return Overflow::kSaturate;
  throw std::invalid_argument("unknown overflow mode '" + std::string(s) + "'; allowed: ieee, saturate");
}

std::string status_to_string(uint32_t s) {
  static constexpr std::array<std::pair<uint32_t, std::string_view>, 8> kNames{{
      {kInexact, "inexact"},
      {kUnderflowToZero, "underflow"},
      {kSubnormalResult, "subnormal"},
      {kOverflow, "overflow"},
      {kSaturated, "saturated"},
      {kNanResult, "nan"},
      {kInvalid, "invalid"},
      {kDivByZero, "div-by-zero"},
  }};
  std::string out;
  for (const auto& [bit, name] : kNames)
    if (s & bit) {
      // Appended piecewise: `"|" + std::string(name)` trips GCC 12's -Wrestrict false positive.
      if (!out.empty()) out += '|';
      out += name;
    }
  return out.empty() ? "exact" : out;
}

}  // namespace precsim

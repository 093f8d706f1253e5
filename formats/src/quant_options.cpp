#include "precsim/formats/quant_options.h"

#include <array>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "precsim/formats/name_table.h"

namespace precsim {
namespace {

constexpr auto kRoundingNames = name_table<Rounding>({
    {Rounding::kNearestEven, "nearest-even"},
    {Rounding::kNearestAway, "nearest-away"},
    {Rounding::kTowardZero, "toward-zero"},
    {Rounding::kUp, "up"},
    {Rounding::kDown, "down"},
    {Rounding::kOdd, "odd"},
    {Rounding::kStochastic, "stochastic"},
    {Rounding::kStochasticA, "stochastic-a"},
    {Rounding::kStochasticB, "stochastic-b"},
    {Rounding::kStochasticC, "stochastic-c"},
});
constexpr auto kOverflowNames = name_table<Overflow>({{Overflow::kIeee, "ieee"},
                                                      {Overflow::kSaturate, "saturate"},
                                                      {Overflow::kSatFinite, "satfinite"},
                                                      {Overflow::kSatPropagate, "satpropagate"},
                                                      {Overflow::kSatNone, "satnone"}});

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

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

std::string_view to_string(Rounding r) { return kRoundingNames.name(r); }
std::string_view to_string(Overflow o) { return kOverflowNames.name(o); }
Rounding parse_rounding(std::string_view s) { return kRoundingNames.parse(s, "rounding"); }
Overflow parse_overflow(std::string_view s) {
  try {
    return kOverflowNames.parse(lower(s), "overflow mode");
  } catch (const std::invalid_argument&) {
    return kOverflowNames.parse(s, "overflow mode");  // the message names the value as written
  }
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

// Agreement statistics, corner-case operands and preset ranking for device-vs-emulation runs.
#include "precsim/sim/hw/gpu_compare.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/rounding.h"
#include "precsim/reports/report.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

uint64_t code_of(const Format& out, double x, const char* side, size_t i) {
  uint32_t status = 0;
  const double r = round_to(out, x, {}, &status);
  if (r != x || std::signbit(r) != std::signbit(x))
    throw std::invalid_argument(std::string(side) + " result " + std::to_string(i) + " (" + hex_float(x) +
                                ") is not a value of " + out.name);
  return encode(out, x).code;
}

QuantOptions saturating() {
  QuantOptions o;
  o.overflow = Overflow::kSaturate;
  return o;
}

float value_in(const Format& f, double x) { return static_cast<float>(round_to(f, x, saturating())); }

}  // namespace

MatchStats compare_results(const Format& out, std::span<const double> device, std::span<const double> emulated) {
  if (device.size() != emulated.size())
    throw std::invalid_argument("compare: " + std::to_string(device.size()) + " device results but " +
                                std::to_string(emulated.size()) + " emulated ones");
  MatchStats s;
  s.count = device.size();
  for (size_t i = 0; i < device.size(); ++i) {
    const double d = device[i], e = emulated[i];
    bool same = false;
    if (std::isnan(d) || std::isnan(e)) {
      same = std::isnan(d) && std::isnan(e);
      if (!same) ++s.nan_mismatches;
    } else {
      const uint64_t cd = code_of(out, d, "device", i), ce = code_of(out, e, "emulated", i);
      same = cd == ce;
      if (!same) {
        if (std::isinf(d) || std::isinf(e)) {
          ++s.nan_mismatches;
        } else {
          s.max_ulp = std::max<int64_t>(s.max_ulp, std::llabs(ordinal(out, cd) - ordinal(out, ce)));
        }
      }
    }
    if (same) {
      ++s.exact;
    } else if (s.first_mismatch < 0) {
      s.first_mismatch = static_cast<int64_t>(i);
      s.first_device = d;
      s.first_emulated = e;
    }
  }
  s.exact_fraction = s.count ? static_cast<double>(s.exact) / static_cast<double>(s.count) : 1.0;
  return s;
}

nlohmann::json to_json(const MatchStats& s) {
  nlohmann::json j = {{"count", s.count},
                      {"exact", s.exact},
                      {"exact_fraction", json_number(s.exact_fraction)},
                      {"max_ulp", s.max_ulp},
                      {"nonfinite_mismatches", s.nan_mismatches},
                      {"first_mismatch", s.first_mismatch}};
  if (s.first_mismatch >= 0) {
    j["first_device"] = hex_float(s.first_device);
    j["first_emulated"] = hex_float(s.first_emulated);
  }
  return j;
}

const std::vector<std::string>& operand_set_names() {
  static const std::vector<std::string> names = {"random", "wide-exponent", "cancellation", "alignment"};
  return names;
}

OperandSet parse_operand_set(std::string_view name) {
  const auto& names = operand_set_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<OperandSet>(i);
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown operand set '" + std::string(name) + "'; allowed: " + all);
}

std::string_view to_string(OperandSet s) { return operand_set_names().at(static_cast<size_t>(s)); }

void make_operands(OperandSet set, const Format& fa, const Format& fb, int64_t m, int64_t n, int64_t k,
                   uint64_t seed, std::vector<float>& a, std::vector<float>& b) {
  a.assign(static_cast<size_t>(m * k), 0.0f);
  b.assign(static_cast<size_t>(k * n), 0.0f);
  constexpr uint64_t kStreamA = 0x6770750a, kStreamB = 0x6770750b;
  auto normal_a = [&](int64_t i) { return standard_normal(seed, kStreamA, static_cast<uint64_t>(i)); };
  auto normal_b = [&](int64_t i) { return standard_normal(seed, kStreamB, static_cast<uint64_t>(i)); };
  auto unif_a = [&](int64_t i) { return uniform01(seed, kStreamA + 16, static_cast<uint64_t>(i)); };
  auto unif_b = [&](int64_t i) { return uniform01(seed, kStreamB + 16, static_cast<uint64_t>(i)); };
  switch (set) {
    case OperandSet::kRandom:
      for (int64_t i = 0; i < m * k; ++i) a[i] = value_in(fa, normal_a(i));
      for (int64_t i = 0; i < k * n; ++i) b[i] = value_in(fb, normal_b(i));
      break;
    case OperandSet::kWideExponent: {
      // Exponents uniform over up to 24 binades around 1 (fewer for narrow formats).
      auto wide = [](const Format& f, double sign_u, double u) {
        const int r = std::min(24, f.emax() - f.emin());
        const int e = static_cast<int>(std::floor(u * (r + 1))) - r / 2;
        return (sign_u < 0 ? -1.0 : 1.0) * std::ldexp(1.0 + std::fmod(u * 1024, 1.0), e);
      };
      for (int64_t i = 0; i < m * k; ++i) a[i] = value_in(fa, wide(fa, normal_a(i), unif_a(i)));
      for (int64_t i = 0; i < k * n; ++i) b[i] = value_in(fb, wide(fb, normal_b(i), unif_b(i)));
      break;
    }
    case OperandSet::kCancellation:
      // Column 2l+1 of A is minus column 2l, and row 2l+1 of B is row 2l raised by one code: each
      // pair of products cancels but for a last-bit difference.
      for (int64_t i = 0; i < m; ++i)
        for (int64_t l = 0; l < k; ++l)
          a[i * k + l] = l % 2 == 1 ? -a[i * k + l - 1] : value_in(fa, normal_a(i * k + l));
      for (int64_t l = 0; l < k; ++l)
        for (int64_t j = 0; j < n; ++j) {
          if (l % 2 == 0) {
            b[l * n + j] = value_in(fb, normal_b(l * n + j));
          } else {
            const double x = b[(l - 1) * n + j];
            const double up = round_to(fb, x + std::ldexp(std::fabs(x), -fb.man_bits), saturating());
            b[l * n + j] = static_cast<float>(l + 1 < k ? up : x);
          }
        }
      break;
    case OperandSet::kAlignment: {
      // Every 8th element of A is large (2^top) and the others 2^-lo .. 2^-(lo+10) below it, across
      // the number of bits the accumulator keeps, while staying normal values of the format.
      const int top = std::min(fa.emax() - 2, 12);
      const int lo = std::min(20, std::max(2, top - fa.emin() - 10));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t l = 0; l < k; ++l) {
          const double x = normal_a(i * k + l);
          const int off = l % 8 == 0 ? 0 : lo + static_cast<int>((l * 7 + i) % 11);
          a[i * k + l] = value_in(fa, std::ldexp(x, top - off));
        }
      for (int64_t i = 0; i < k * n; ++i) b[i] = value_in(fb, normal_b(i));
      break;
    }
  }
}

std::vector<std::string> candidate_presets(const Format& in, bool fp16_accumulation) {
  if (fp16_accumulation)
    return {"h100-f16acc", "a100-f16acc", "seq:acc=fp16", "exact:acc=fp16"};
  if (is_tf32(in)) return {"h100-tf32", "a100-tf32", "fp32-seq", "exact"};
  if (in.bits() == 8) return {"h100-fp8-fast", "h100-fp8-promote", "ada-fp8", "b200-fp8", "exact"};
  if (same_encoding(in, format_by_name("fp32"))) return {"fp32-seq", "fp32-fma", "pairwise", "exact"};
  return {"h100", "a100", "v100", "ada", "b200", "fp32-seq", "fp32-fma", "exact"};
}

std::vector<PresetScore> rank_presets(std::vector<PresetScore> scores) {
  std::stable_sort(scores.begin(), scores.end(), [](const PresetScore& x, const PresetScore& y) {
    if (x.stats.exact != y.stats.exact) return x.stats.exact > y.stats.exact;
    return x.stats.max_ulp < y.stats.max_ulp;
  });
  return scores;
}

}  // namespace precsim

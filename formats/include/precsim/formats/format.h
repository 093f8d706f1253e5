// Number formats as data: one row per format, in the manner of LLVM's fltSemantics.
// Everything about a format (its range, its codes, how it rounds) is derived from this row; adding
// a format is adding a row to kPresets in format.cpp and a row to the tests' table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace precsim {

// How a format spends its top codes on non-finite values.
enum class NonFinite : uint8_t {
  kIeee,        // exponent all ones: Inf (mantissa 0) and NaNs
  kNanOnly,     // only the all-ones code (each sign) is NaN; no Inf (float8_e4m3fn, e8m0)
  kFiniteOnly,  // every code is finite (FP6, FP4, integers)
  kFnuz,        // the negative-zero code is the only NaN; no Inf, no -0 (the *fnuz formats)
  // IEEE P3109 v4.0 extended formats (§4.7.2). Signed: as kFnuz, plus +-Inf at the largest
  // magnitude code (0x7F/0xFF in 8 bits). Unsigned: NaN at 2^K-1 and +Inf at 2^K-2.
  kFnuzInf,
  kNanInf,
};

enum class FormatKind : uint8_t {
  kFloat,  // sign | exponent | mantissa
  kInt,    // symmetric two's complement integer: the most negative code is not used
};

struct Format {
  std::string name;  // canonical name (ml_dtypes spelling for presets)
  int exp_bits = 0;
  int man_bits = 0;
  int bias = 0;
  bool subnormals = true;  // false: exponent field 0 encodes only zero (custom formats)
  NonFinite nonfinite = NonFinite::kIeee;
  bool is_signed = true;
  bool has_zero = true;  // false only for E8M0, whose exponent field 0 is the normal 2^-127
  FormatKind kind = FormatKind::kFloat;
  // Only meaningful without mantissa bits (P3109 P = 1): ties to even and round to odd look at the
  // parity of the code, i.e. of the biased exponent (§4.7.4 CodeIsEven), where E8M0's rule sends
  // every tie up. False for every other format, so P3109 formats with P > 1 keep the encoding of
  // the presets they equal (Binary8p4sf is float8_e4m3fnuz).
  bool exp_parity = false;

  // Storage width: sign + exponent + mantissa bits.
  int bits() const { return (is_signed ? 1 : 0) + exp_bits + man_bits; }
  // Unbiased exponent of the smallest normal binade and of the largest finite binade.
  int emin() const { return has_zero ? 1 - bias : -bias; }
  int emax() const;
  // Exponent of the spacing of the finest values: 2^quantum_exp is the smallest subnormal, or the
  // smallest normal where subnormals are off.
  int quantum_exp() const { return subnormals && has_zero ? emin() - man_bits : emin(); }
  // Magnitude codes (the code without its sign bit).
  uint64_t max_finite_code() const;
  uint64_t sign_mask() const { return is_signed ? uint64_t{1} << (exp_bits + man_bits) : 0; }
  uint64_t code_mask() const;
  bool has_inf() const {
    return nonfinite == NonFinite::kIeee || nonfinite == NonFinite::kFnuzInf || nonfinite == NonFinite::kNanInf;
  }
  bool has_nan() const { return nonfinite != NonFinite::kFiniteOnly; }
  bool has_negative_zero() const {
    return is_signed && has_zero && nonfinite != NonFinite::kFnuz && nonfinite != NonFinite::kFnuzInf &&
           kind == FormatKind::kFloat;
  }

  double max_finite() const;
  double min_normal() const;
  double min_subnormal() const;  // equals min_normal() without subnormals
  double epsilon() const;        // gap between 1 and the next value: 2^-man_bits
  uint64_t finite_count() const; // distinct finite values, +0 and -0 counted once
  double range_binades() const;  // log2(max_finite / min_subnormal)

  // Whether a code is the canonical encoding of its value (non-canonical: int's unused most
  // negative code, mantissa bits in field 0 when subnormals are off, non-canonical NaNs are not
  // counted as non-canonical: every NaN code decodes to NaN).
  bool is_canonical(uint64_t code) const;

  friend bool operator==(const Format&, const Format&) = default;
};

// Preset by name or alias ("e4m3", "float8_e4m3fn", "bf16"...) or a custom spec
// "eXmY[:bias=B][:nosub][:ieee|nanonly|finite|fnuz][:unsigned]", or an IEEE P3109 name
// Binary{K}p{P}{s|u}{e|f} (p3109.h), case-insensitively. nullopt with a message on error.
std::optional<Format> parse_format(std::string_view spec, std::string* error = nullptr);
// As parse_format, throwing std::invalid_argument with the message (the message lists the names).
Format format_by_name(std::string_view spec);

struct FormatPreset {
  Format format;
  std::vector<std::string> aliases;
};
const std::vector<FormatPreset>& format_presets();
std::string known_format_names();  // "fp64, fp32, ..." for error messages

// Whether two formats have the same values and codes: every field but the name. A custom spec keeps
// the name it was written with ("e4m3:nanonly"), so code that asks "is this E4M3?" must compare
// encodings, not names: "e4m3:nanonly" is float8_e4m3fn wherever float8_e4m3fn is accepted.
bool same_encoding(const Format& a, const Format& b);
// The preset with the encoding of f (f itself when it is a preset), or nullptr.
const FormatPreset* preset_with_encoding(const Format& f);

std::string_view to_string(NonFinite);

}  // namespace precsim

#include "precsim/formats/format.h"

#include <charconv>
#include <cmath>
#include <regex>
#include <stdexcept>

#include "precsim/formats/p3109.h"
#include "precsim/formats/rounding.h"
#include "precsim/formats/spec.h"

namespace precsim {
namespace {

Format make(std::string name, int e, int m, int bias, NonFinite nf, bool is_signed = true,
            bool has_zero = true, FormatKind kind = FormatKind::kFloat) {
  Format f;
  f.name = std::move(name);
  f.exp_bits = e;
  f.man_bits = m;
  f.bias = bias;
  f.nonfinite = nf;
  f.is_signed = is_signed;
  f.has_zero = has_zero;
  f.subnormals = has_zero;
  f.kind = kind;
  return f;
}

// Integers reuse the float machinery as formats with no exponent field: mantissa bits hold the
// magnitude and the bias puts the quantum at 2^0 (quantum_exp = 1 - bias - man_bits = 0).
Format make_int(std::string name, int bits) {
  return make(std::move(name), 0, bits - 1, 2 - bits, NonFinite::kFiniteOnly, true, true,
              FormatKind::kInt);
}

std::vector<FormatPreset> build_presets() {
  using NF = NonFinite;
  std::vector<FormatPreset> p;
  p.push_back({make("fp64", 11, 52, 1023, NF::kIeee), {"float64", "double"}});
  p.push_back({make("fp32", 8, 23, 127, NF::kIeee), {"float32", "float"}});
  p.push_back({make("tf32", 8, 10, 127, NF::kIeee), {"tensorfloat32"}});
  p.push_back({make("fp16", 5, 10, 15, NF::kIeee), {"float16", "half"}});
  p.push_back({make("bf16", 8, 7, 127, NF::kIeee), {"bfloat16"}});
  p.push_back({make("float8_e4m3fn", 4, 3, 7, NF::kNanOnly), {"e4m3", "e4m3fn", "fp8_e4m3"}});
  p.push_back({make("float8_e4m3", 4, 3, 7, NF::kIeee), {"e4m3_ieee"}});
  p.push_back({make("float8_e4m3fnuz", 4, 3, 8, NF::kFnuz), {"e4m3fnuz"}});
  p.push_back({make("float8_e4m3b11fnuz", 4, 3, 11, NF::kFnuz), {"e4m3b11fnuz"}});
  p.push_back({make("float8_e5m2", 5, 2, 15, NF::kIeee), {"e5m2", "fp8_e5m2"}});
  p.push_back({make("float8_e5m2fnuz", 5, 2, 16, NF::kFnuz), {"e5m2fnuz"}});
  p.push_back({make("float8_e3m4", 3, 4, 3, NF::kIeee), {"e3m4"}});
  p.push_back({make("float6_e2m3fn", 2, 3, 1, NF::kFiniteOnly), {"e2m3", "fp6_e2m3"}});
  p.push_back({make("float6_e3m2fn", 3, 2, 3, NF::kFiniteOnly), {"e3m2", "fp6_e3m2"}});
  p.push_back({make("float4_e2m1fn", 2, 1, 1, NF::kFiniteOnly), {"e2m1", "fp4", "fp4_e2m1"}});
  p.push_back({make("float8_e8m0fnu", 8, 0, 127, NF::kNanOnly, false, false), {"e8m0", "ue8m0"}});
  p.push_back({make_int("int8", 8), {"i8"}});
  p.push_back({make_int("int4", 4), {"i4"}});
  return p;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const char* kCustomGrammar = "eXmY[:bias=B][:nosub][:ieee|nanonly|finite|fnuz][:unsigned]";

// "e4m3" -> (4, 3); nullopt for anything else.
std::optional<std::pair<int, int>> exp_man_bits(std::string_view name) {
  static const std::regex head(R"(^e(\d{1,2})m(\d{1,2})$)");
  std::match_results<std::string_view::const_iterator> mt;
  if (!std::regex_match(name.begin(), name.end(), mt, head)) return std::nullopt;
  return std::pair{std::stoi(mt[1]), std::stoi(mt[2])};
}

// Applies one option of a custom spec; returns the error, or "" when it was understood.
std::string apply_format_option(Format& f, const SpecOption& o, bool& nonfinite_given) {
  static const std::pair<std::string_view, NonFinite> kNonFinite[] = {
      {"ieee", NonFinite::kIeee},         {"nanonly", NonFinite::kNanOnly}, {"fn", NonFinite::kNanOnly},
      {"finite", NonFinite::kFiniteOnly}, {"fnuz", NonFinite::kFnuz}};
  if (o.key == "bias" && o.value) {
    const std::string& v = *o.value;
    int bias = 0;
    const char* begin = v.data() + (v.starts_with('+') && !v.starts_with("+-") ? 1 : 0);
    const auto [end, ec] = std::from_chars(begin, v.data() + v.size(), bias);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return "bad bias '" + v + "', expected an integer";
    f.bias = bias;
    return "";
  }
  if (!o.is_flag()) return "unknown option '" + o.text + "'; allowed: bias=B, nosub, ieee, nanonly, finite, fnuz, unsigned";
  for (const auto& [name, nf] : kNonFinite) {
    if (o.key != name) continue;
    if (nonfinite_given) return "ieee, nanonly, finite and fnuz exclude each other";
    f.nonfinite = nf;
    nonfinite_given = true;
    return "";
  }
  if (o.key == "nosub") f.subnormals = false;
  else if (o.key == "unsigned") f.is_signed = false;
  else return "unknown option '" + o.text + "'; allowed: bias=B, nosub, ieee, nanonly, finite, fnuz, unsigned";
  return "";
}

// Encodings the rounding code cannot represent, and ranges a double cannot hold.
std::string check_custom(const Format& f) {
  const int e = f.exp_bits, m = f.man_bits;
  if (f.nonfinite == NonFinite::kIeee && e < 2) return "IEEE non-finite encoding needs at least 2 exponent bits";
  if (f.nonfinite == NonFinite::kIeee && m == 0)
    return "IEEE non-finite encoding needs a mantissa bit for NaN; use :nanonly or :finite";
  if (f.nonfinite == NonFinite::kFnuz && !f.is_signed) return "fnuz needs a sign bit (its NaN is the negative-zero code)";
  if (f.nonfinite == NonFinite::kNanOnly && m == 0 && e < 2) return "nanonly with no mantissa needs at least 2 exponent bits";
  // Every value must be a double, so that decode() and the double API are exact.
  if (f.emax() > 1023 || f.quantum_exp() < -1074)
    return "bias " + std::to_string(f.bias) + " puts its range outside double's (values must lie in 2^-1074..2^1023)";
  return "";
}

std::optional<Format> parse_custom(const std::string& text, std::string* error) {
  auto fail = [&](const std::string& msg) -> std::optional<Format> {
    if (error) *error = msg;
    return std::nullopt;
  };
  Spec spec;
  try {
    spec = parse_spec(text, {.what = "format"});
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  }
  const auto bits = exp_man_bits(spec.name);
  if (!bits)
    return fail("unknown format '" + text + "'; known formats: " + known_format_names() + "; or a custom " + kCustomGrammar);
  const auto [e, m] = *bits;
  const std::string prefix = "format '" + text + "': ";
  if (e < 1 || e > 11) return fail(prefix + "exponent bits must be 1..11, got " + std::to_string(e));
  if (m < 0 || m > 52) return fail(prefix + "mantissa bits must be 0..52, got " + std::to_string(m));
  Format f = make("", e, m, (1 << (e - 1)) - 1, NonFinite::kIeee);
  bool nonfinite_given = false;
  for (const auto& o : spec.options)
    if (std::string why = apply_format_option(f, o, nonfinite_given); !why.empty())
      return fail(spec.error(o, why).what());
  if (std::string why = check_custom(f); !why.empty()) return fail(prefix + why);
  f.name = text;
  return f;
}

}  // namespace

const std::vector<FormatPreset>& format_presets() {
  static const std::vector<FormatPreset> presets = build_presets();
  return presets;
}

std::string known_format_names() {
  std::string s;
  for (const auto& p : format_presets()) {
    if (!s.empty()) s += ", ";
    s += p.format.name;
    if (!p.aliases.empty()) {
      s += " (";
      for (size_t i = 0; i < p.aliases.size(); ++i) s += (i ? "/" : "") + p.aliases[i];
      s += ")";
    }
  }
  return s;
}

std::optional<Format> parse_format(std::string_view spec_in, std::string* error) {
  const std::string spec = lower(spec_in);
  for (const auto& p : format_presets()) {
    if (p.format.name == spec) return p.format;
    for (const auto& a : p.aliases)
      if (a == spec) return p.format;
  }
  if (spec.starts_with("binary")) return parse_p3109(spec, error);
  return parse_custom(spec, error);
}

bool same_encoding(const Format& a, const Format& b) {
  Format unnamed = b;
  unnamed.name = a.name;
  return a == unnamed;
}

const FormatPreset* preset_with_encoding(const Format& f) {
  for (const auto& p : format_presets())
    if (same_encoding(p.format, f)) return &p;
  return nullptr;
}

Format format_by_name(std::string_view spec) {
  std::string err;
  auto f = parse_format(spec, &err);
  if (!f) throw std::invalid_argument(err);
  return *f;
}

uint64_t Format::code_mask() const {
  const int b = bits();
  return b >= 64 ? ~uint64_t{0} : (uint64_t{1} << b) - 1;
}

uint64_t Format::max_finite_code() const {
  const uint64_t all = (uint64_t{1} << (exp_bits + man_bits)) - 1;
  switch (nonfinite) {
    case NonFinite::kIeee: return (((uint64_t{1} << exp_bits) - 1) << man_bits) - 1;
    case NonFinite::kNanOnly:
    case NonFinite::kFnuzInf: return all - 1;  // signed: the magnitude all ones is Inf
    case NonFinite::kNanInf: return all - 2;
    case NonFinite::kFiniteOnly:
    case NonFinite::kFnuz: return all;
  }
  return all;
}

int Format::emax() const { return std::ilogb(max_finite()); }
double Format::max_finite() const { return decode(*this, max_finite_code()); }
double Format::min_normal() const {
  return kind == FormatKind::kInt ? 1.0 : std::ldexp(1.0, emin());
}
double Format::min_subnormal() const { return std::ldexp(1.0, quantum_exp()); }
double Format::epsilon() const {
  return kind == FormatKind::kInt ? 1.0 : std::ldexp(1.0, -man_bits);
}

uint64_t Format::finite_count() const {
  uint64_t magnitudes = max_finite_code() + 1;
  if (!subnormals && has_zero && man_bits > 0) magnitudes -= (uint64_t{1} << man_bits) - 1;
  if (!is_signed) return magnitudes;
  return has_zero ? 2 * magnitudes - 1 : 2 * magnitudes;
}

double Format::range_binades() const { return std::log2(max_finite()) - quantum_exp(); }

bool Format::is_canonical(uint64_t code) const {
  if (code & ~code_mask()) return false;
  if (kind == FormatKind::kInt) return code != sign_mask();
  const uint64_t mag = code & ~sign_mask();
  if (!subnormals && has_zero && (mag >> man_bits) == 0 && mag != 0) return false;
  return true;
}

std::string_view to_string(NonFinite nf) {
  switch (nf) {
    case NonFinite::kIeee: return "ieee";
    case NonFinite::kNanOnly: return "nan-only";
    case NonFinite::kFiniteOnly: return "finite-only";
    case NonFinite::kFnuz: return "fnuz";
    case NonFinite::kFnuzInf: return "fnuz-inf";
    case NonFinite::kNanInf: return "nan-inf";
  }
  return "?";
}

}  // namespace precsim

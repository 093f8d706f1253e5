#include "precsim/formats/p3109.h"

#include <regex>
#include <stdexcept>

namespace precsim {
namespace {

constexpr int kMinBits = 3, kMaxBits = 16;  // §3.1 asks K > 2; issue 31 asks for K up to 16

// Exponent field width: the code's bits less the sign and the P - 1 trailing significand bits.
int exp_field(int k, int p, bool is_signed) { return k - (is_signed ? 1 : 0) - (p - 1); }

std::string p3109_name(int k, int p, bool is_signed, bool extended) {
  return "Binary" + std::to_string(k) + "p" + std::to_string(p) + (is_signed ? "s" : "u") + (extended ? "e" : "f");
}

std::string range_error(int k, int p, bool is_signed, bool extended) {
  const std::string name = p3109_name(k, p, is_signed, extended);
  if (k < kMinBits || k > kMaxBits)
    return "P3109 format " + name + ": bitwidth K must be " + std::to_string(kMinBits) + ".." +
           std::to_string(kMaxBits) + ", got " + std::to_string(k);
  const int p_max = is_signed ? k - 1 : k;  // §3.1: 0 < P < K signed, 0 < P <= K unsigned
  if (p < 1 || p > p_max)
    return "P3109 format " + name + ": precision P of a " + (is_signed ? "signed " : "unsigned ") + std::to_string(k) +
           "-bit format must be 1.." + std::to_string(p_max) + ", got " + std::to_string(p);
  if (!p3109_fits_double(k, p, is_signed))
    return "P3109 format " + name + ": its " + std::to_string(exp_field(k, p, is_signed)) +
           "-bit exponent field spans beyond double's range, which precsim's formats must fit; " + std::to_string(k) +
           "-bit " + (is_signed ? "signed" : "unsigned") + " formats are supported for P " +
           std::to_string(k - (is_signed ? 11 : 10)) + ".." + std::to_string(p_max);
  return "";
}

}  // namespace

bool p3109_fits_double(int k, int p, bool is_signed) { return exp_field(k, p, is_signed) <= 11; }

Format p3109_format(int k, int p, bool is_signed, bool extended) {
  if (std::string why = range_error(k, p, is_signed, extended); !why.empty()) throw std::invalid_argument(why);
  Format f;
  f.name = p3109_name(k, p, is_signed, extended);
  f.exp_bits = exp_field(k, p, is_signed);
  f.man_bits = p - 1;
  // 2^(K-P-1) signed, 2^(K-P) unsigned (§3.1): in both, half the exponent field's range.
  f.bias = 1 << (f.exp_bits - 1);
  f.is_signed = is_signed;
  // Signed: NaN at 2^(K-1), the negative-zero code, as the fnuz formats; unsigned: NaN at 2^K-1
  // (§4.7.2). Extended formats add Inf at 2^(K-1)-1 and 2^K-1 signed, 2^K-2 unsigned.
  if (is_signed)
    f.nonfinite = extended ? NonFinite::kFnuzInf : NonFinite::kFnuz;
  else
    f.nonfinite = extended ? NonFinite::kNanInf : NonFinite::kNanOnly;
  f.exp_parity = p == 1;
  return f;
}

std::optional<Format> parse_p3109(std::string_view name, std::string* error) {
  if (!name.starts_with("binary")) return std::nullopt;
  auto fail = [&](const std::string& msg) -> std::optional<Format> {
    if (error) *error = msg;
    return std::nullopt;
  };
  static const std::regex grammar(R"(^binary(\d{1,4})p(\d{1,4})([su])([ef])$)");
  std::match_results<std::string_view::const_iterator> mt;
  if (!std::regex_match(name.begin(), name.end(), mt, grammar))
    return fail("unknown format '" + std::string(name) +
                "'; P3109 formats are Binary{K}p{P}{s|u}{e|f}, e.g. Binary8p3se, Binary4p2sf "
                "(K 3..16; P 1..K-1 signed, 1..K unsigned)");
  const int k = std::stoi(mt[1]), p = std::stoi(mt[2]);
  const bool is_signed = mt[3] == "s", extended = mt[4] == "e";
  if (std::string why = range_error(k, p, is_signed, extended); !why.empty())
    return fail("format '" + std::string(name) + "': " + why);
  return p3109_format(k, p, is_signed, extended);
}

}  // namespace precsim

// IEEE P3109 v4.0 formats Binary{K}p{P}{s|u}{e|f} (Interim Report §3): one NaN, no negative zero,
// the exponent bias 2^(K-P-1) signed and 2^(K-P) unsigned, Inf only in extended formats.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "precsim/formats/format.h"

namespace precsim {

// The format Binary{k}p{p}{s|u}{e|f}; throws std::invalid_argument naming the valid range when k or
// p is outside it, or when its values do not fit in a double (see p3109_fits_double).
Format p3109_format(int k, int p, bool is_signed, bool extended);

// Whether every value of the format is a double: precsim's formats must be (decode returns one).
// This excludes the widest exponent fields: K - P > 11 signed, K - P > 10 unsigned.
bool p3109_fits_double(int k, int p, bool is_signed);

// A lower-case name beginning "binary": the format, or nullopt with *error set. Any other name:
// nullopt with *error untouched.
std::optional<Format> parse_p3109(std::string_view lower_name, std::string* error);

}  // namespace precsim

// The P3109 working group's value tables (tests/data/p3109, K 3..8: every signed and unsigned,
// extended and finite format) decoded code by code, and every value encoded back, exactly; and the
// names: case-insensitive, refused outside the report's range with the range named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/p3109.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

const std::filesystem::path kDir = std::filesystem::path(PRECSIM_SOURCE_DIR) / "tests/data/p3109";

struct Row {
  uint64_t code;
  double value;
  bool subnormal;
};

// "0x7f,Inf, " / "0x01,0x0.8p-16,*": strtod reads C99 hex floats, Inf and NaN.
std::vector<Row> read_table(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "codepoint,value,subnormal") << p;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const size_t c1 = line.find(','), c2 = line.find(',', c1 + 1);
    const std::string v = line.substr(c1 + 1, c2 - c1 - 1);
    rows.push_back(
        {std::stoull(line.substr(0, c1), nullptr, 16), std::strtod(v.c_str(), nullptr), line.substr(c2 + 1) == "*"});
  }
  return rows;
}

const Rounding kModes[] = {Rounding::kNearestEven, Rounding::kNearestAway, Rounding::kTowardZero,
                           Rounding::kUp,          Rounding::kDown,        Rounding::kOdd,
                           Rounding::kStochastic,  Rounding::kStochasticA, Rounding::kStochasticB,
                           Rounding::kStochasticC};
const Overflow kSats[] = {Overflow::kIeee, Overflow::kSatFinite, Overflow::kSatPropagate, Overflow::kSatNone};

TEST(P3109Tables, EveryCodeOfEveryTableDecodesAndEncodesBackExactly) {
  int tables = 0;
  uint64_t codes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (entry.path().extension() != ".csv") continue;
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    const Format f = format_by_name(name);
    EXPECT_EQ(f.name, name);
    const std::vector<Row> rows = read_table(entry.path());
    ASSERT_EQ(rows.size(), uint64_t{1} << f.bits());
    for (uint64_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      ASSERT_EQ(r.code, i);
      const double got = decode(f, r.code);
      if (std::isnan(r.value)) {
        EXPECT_TRUE(std::isnan(got)) << std::hex << r.code;
        EXPECT_EQ(nan_code(f), r.code);
      } else {
        EXPECT_EQ(got, r.value) << std::hex << r.code;
      }
      EXPECT_EQ(r.subnormal, r.value != 0 && std::fabs(r.value) < f.min_normal() && std::isfinite(r.value));
      // An exact value is its own code in every mode and every saturation (Inf kept but under
      // SatFinite, which sends it to the extremal finite value).
      for (const Rounding m : kModes)
        for (const Overflow s : kSats) {
          const QuantOptions o{.rounding = m, .overflow = s, .sr_bits = 7, .sr_key = {.seed = i}};
          if (std::isinf(r.value) && s == Overflow::kSatFinite) {
            EXPECT_EQ(encode(f, r.value, o).code, max_code(f, r.value < 0));
            continue;
          }
          EXPECT_EQ(encode(f, r.value, o, i).code, r.code)
              << std::hex << r.code << " " << to_string(m) << " " << to_string(s);
        }
      ++codes;
    }
    ++tables;
  }
  // K 3..8: signed P 1..K-1 and unsigned P 1..K, each extended and finite.
  int expected = 0;
  for (int k = 3; k <= 8; ++k) expected += 2 * ((k - 1) + k);
  EXPECT_EQ(tables, expected);
  EXPECT_EQ(codes, 2 * (2 * 8 + 3 * 16 + 4 * 32 + 5 * 64 + 6 * 128 + 7 * 256) +
                       2 * (3 * 8 + 4 * 16 + 5 * 32 + 6 * 64 + 7 * 128 + 8 * 256));
}

TEST(P3109Names, CaseInsensitiveAndShapedAsTheReportSays) {
  const Format a = format_by_name("binary8p3se"), b = format_by_name("BINARY8P3SE");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.name, "Binary8p3se");
  EXPECT_EQ(a.bias, 16);                              // 2^(K-P-1)
  EXPECT_EQ(format_by_name("Binary8p3ue").bias, 32);  // 2^(K-P)
  EXPECT_FALSE(a.has_negative_zero());
  EXPECT_EQ(inf_code(a, false), 0x7fu);
  EXPECT_EQ(inf_code(a, true), 0xffu);
  EXPECT_EQ(inf_code(format_by_name("binary8p3ue"), false), 0xfeu);
  EXPECT_FALSE(format_by_name("Binary4p2sf").has_inf());
  // §3.1 NOTE 2: 2.0 in Binary8p4se is 0x48.
  EXPECT_EQ(encode(format_by_name("Binary8p4se"), 2.0).code, 0x48u);
  // P > 1 formats with an fnuz preset's encoding are that preset (ml_dtypes maps through it).
  EXPECT_TRUE(same_encoding(format_by_name("binary8p4sf"), format_by_name("float8_e4m3fnuz")));
  EXPECT_TRUE(same_encoding(format_by_name("binary8p3sf"), format_by_name("float8_e5m2fnuz")));
}

std::string parse_error(const std::string& name) {
  std::string err;
  EXPECT_FALSE(parse_format(name, &err).has_value()) << name;
  return err;
}

TEST(P3109Names, OutOfRangeNamesAreRefusedWithTheValidRange) {
  EXPECT_NE(parse_error("binary17p3se").find("bitwidth K must be 3..16, got 17"), std::string::npos);
  EXPECT_NE(parse_error("Binary2p1uf").find("bitwidth K must be 3..16, got 2"), std::string::npos);
  EXPECT_NE(parse_error("binary8p8se").find("signed 8-bit format must be 1..7, got 8"), std::string::npos);
  EXPECT_NE(parse_error("binary8p9ue").find("unsigned 8-bit format must be 1..8, got 9"), std::string::npos);
  EXPECT_NE(parse_error("binary8p0sf").find("must be 1..7, got 0"), std::string::npos);
  EXPECT_NE(parse_error("binary8p3s").find("Binary{K}p{P}{s|u}{e|f}"), std::string::npos);
  // Exponent fields wider than double's: named, with the precisions that are supported.
  EXPECT_NE(parse_error("binary16p3se").find("supported for P 5..15"), std::string::npos);
  EXPECT_NE(parse_error("binary16p5ue").find("supported for P 6..16"), std::string::npos);
  EXPECT_TRUE(parse_format("binary16p5se").has_value());
  EXPECT_TRUE(parse_format("binary16p6ue").has_value());
}

}  // namespace
}  // namespace precsim

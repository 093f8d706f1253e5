// Each preset's derived properties against values from the OCP MX spec, the FP8 paper and
// ml_dtypes' finfo (docs/reference/sources.md, Formats and §1.2).
#include <gtest/gtest.h>

#include <cmath>

#include "precsim/formats/format.h"

namespace precsim {
namespace {

struct Row {
  const char* name;
  int bits;
  double max_finite;
  double min_normal;
  double min_subnormal;
  uint64_t finite_count;
};

class FormatTable : public ::testing::TestWithParam<Row> {};

TEST_P(FormatTable, DerivedProperties) {
  const Row& r = GetParam();
  const Format f = format_by_name(r.name);
  EXPECT_EQ(f.bits(), r.bits);
  EXPECT_EQ(f.max_finite(), r.max_finite);
  EXPECT_EQ(f.min_normal(), r.min_normal);
  EXPECT_EQ(f.min_subnormal(), r.min_subnormal);
  EXPECT_EQ(f.finite_count(), r.finite_count);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, FormatTable,
    ::testing::Values(
        Row{"fp32", 32, 0x1.fffffep127, 0x1p-126, 0x1p-149, 4278190079ull},
        Row{"fp16", 16, 65504, 0x1p-14, 0x1p-24, 63487},
        Row{"bf16", 16, 0x1.fep127, 0x1p-126, 0x1p-133, 65279},
        Row{"tf32", 19, 0x1.ffcp127, 0x1p-126, 0x1p-136, 522239},
        Row{"e4m3", 8, 448, 0x1p-6, 0x1p-9, 253},
        Row{"float8_e4m3", 8, 240, 0x1p-6, 0x1p-9, 239},
        Row{"float8_e4m3fnuz", 8, 240, 0x1p-7, 0x1p-10, 255},
        Row{"float8_e4m3b11fnuz", 8, 30, 0x1p-10, 0x1p-13, 255},
        Row{"e5m2", 8, 57344, 0x1p-14, 0x1p-16, 247},
        Row{"float8_e5m2fnuz", 8, 57344, 0x1p-15, 0x1p-17, 255},
        Row{"float8_e3m4", 8, 15.5, 0x1p-2, 0x1p-6, 223},
        Row{"e2m3", 6, 7.5, 1, 0.125, 63},
        Row{"e3m2", 6, 28, 0.25, 0.0625, 63},
        Row{"e2m1", 4, 6, 1, 0.5, 15},
        Row{"e8m0", 8, 0x1p127, 0x1p-127, 0x1p-127, 255},
        Row{"int8", 8, 127, 1, 1, 255},
        Row{"int4", 4, 7, 1, 1, 15}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(FormatParse, AliasesResolveToPresets) {
  EXPECT_EQ(format_by_name("e4m3").name, "float8_e4m3fn");
  EXPECT_EQ(format_by_name("BFloat16").name, "bf16");
  EXPECT_EQ(format_by_name("fp4").name, "float4_e2m1fn");
}

TEST(FormatParse, CustomFormats) {
  const Format f = format_by_name("e5m7");
  EXPECT_EQ(f.bias, 15);
  EXPECT_EQ(f.max_finite(), std::ldexp(2.0 - std::ldexp(1.0, -7), 15));
  const Format g = format_by_name("e4m3:bias=8:fnuz");
  EXPECT_EQ(g.max_finite(), 240);
  const Format h = format_by_name("e3m2:nosub:finite");
  EXPECT_EQ(h.min_subnormal(), h.min_normal());
  EXPECT_EQ(h.finite_count(), 2 * (32 - 3) - 1);
}

TEST(FormatParse, BadSpecsNameTheValueAndTheChoices) {
  std::string err;
  EXPECT_FALSE(parse_format("e4m3x", &err));
  EXPECT_NE(err.find("e4m3x"), std::string::npos);
  EXPECT_NE(err.find("float8_e5m2"), std::string::npos);
  EXPECT_FALSE(parse_format("e12m3", &err));
  EXPECT_NE(err.find("1..11"), std::string::npos);
  EXPECT_FALSE(parse_format("e5m53", &err));
  EXPECT_NE(err.find("0..52"), std::string::npos);
  EXPECT_FALSE(parse_format("e4m3:wat", &err));
  EXPECT_NE(err.find("wat"), std::string::npos);
  EXPECT_FALSE(parse_format("e4m3:bias=x", &err));
  EXPECT_FALSE(parse_format("e8m23:bias=-2000", &err));
  // IEEE needs a mantissa bit to tell NaN from Inf; without one there is no NaN code at all.
  EXPECT_FALSE(parse_format("e5m0", &err));
  EXPECT_NE(err.find("nanonly"), std::string::npos);
  EXPECT_TRUE(parse_format("e5m0:nanonly", &err));
}

}  // namespace
}  // namespace precsim

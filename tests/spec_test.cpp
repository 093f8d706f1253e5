// The NAME[:option...] grammar shared by formats, block-scaling schemes, accumulation models and
// distributions (formats/spec.h), and what each of those four makes of it.
#include "precsim/formats/spec.h"

#include <gtest/gtest.h>

#include <string>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/data/distributions.h"

namespace precsim {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

std::string spec_error(std::string_view text, SpecSyntax syntax = {}) {
  return error_of([&] { parse_spec(text, syntax); });
}

TEST(SpecGrammar, NameFlagsAndKeyValuesInOrder) {
  const Spec s = parse_spec("mxfp4:rule=rceil:2d:eps=");
  EXPECT_EQ(s.name, "mxfp4");
  ASSERT_EQ(s.options.size(), 3u);
  EXPECT_EQ(s.options[0].key, "rule");
  EXPECT_EQ(s.options[0].value, "rceil");
  EXPECT_EQ(s.options[0].column, 7u);
  EXPECT_TRUE(s.options[1].is_flag());
  EXPECT_EQ(s.options[1].key, "2d");
  EXPECT_EQ(s.options[1].column, 18u);
  EXPECT_EQ(s.options[2].value, "");  // "key=" has an empty value, not none
  EXPECT_FALSE(s.options[2].is_flag());
  EXPECT_EQ(parse_spec("bf16").options.size(), 0u);
  EXPECT_EQ(s.find("rule")->value, "rceil");
  EXPECT_EQ(s.find("block"), nullptr);
}

TEST(SpecGrammar, EmptyPartsAreRefusedWithTheirColumn) {
  EXPECT_NE(spec_error("").find("empty"), std::string::npos);
  EXPECT_EQ(spec_error("mxfp4::rule=rceil"), "spec 'mxfp4::rule=rceil': empty option (column 7)");
  EXPECT_EQ(spec_error("mxfp4:"), "spec 'mxfp4:': empty option (column 7)");
  EXPECT_EQ(spec_error(":rule=rceil", {.what = "scheme"}), "scheme ':rule=rceil': no name before ':' (column 1)");
}

TEST(SpecGrammar, EqualsWithoutKey) {
  EXPECT_EQ(spec_error("h100:=30", {.what = "accumulation model"}),
            "accumulation model 'h100:=30': '=30' has no key before '=' (column 6)");
}

TEST(SpecGrammar, WhitespaceIsRefused) {
  EXPECT_EQ(spec_error("mxfp4: rule=rceil"), "spec 'mxfp4: rule=rceil': whitespace (column 7)");
  EXPECT_EQ(spec_error(" bf16"), "spec ' bf16': whitespace (column 1)");
  EXPECT_EQ(spec_error("bf16\t"), "spec 'bf16\t': whitespace (column 5)");
}

TEST(SpecGrammar, DuplicateKeysAreRefusedUnlessLaterOverrides) {
  EXPECT_EQ(spec_error("mxfp4:axis=0:rule=ceil:axis=1"),
            "spec 'mxfp4:axis=0:rule=ceil:axis=1': 'axis' given twice (first at column 7) (column 24)");
  EXPECT_NE(spec_error("e4m3:nosub:nosub").find("'nosub' given twice"), std::string::npos);
  const Spec s = parse_spec("h100:F=30:F=31", {.later_key_overrides = true});
  EXPECT_EQ(s.find("F")->value, "31");
}

TEST(SpecGrammar, SeparatorsOfTheSyntax) {
  const Spec s = parse_spec("uniform:low=0,high=1:x", {.separators = ":,"});
  ASSERT_EQ(s.options.size(), 3u);
  EXPECT_EQ(s.options[1].key, "high");
  EXPECT_EQ(s.options[1].column, 15u);
  EXPECT_EQ(parse_spec("uniform:low=0,high=1").options.size(), 1u);  // ',' is part of the value
}

TEST(SpecGrammar, UnknownKeysAreListedInOrder) {
  const Spec s = parse_spec("normal:mean=1:sd=2:std=3:x");
  const auto u = s.unknown({"mean", "std"});
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0]->text, "sd=2");
  EXPECT_EQ(u[1]->text, "x");
  EXPECT_EQ(join_names({"mean", "std"}), "mean, std");
}

// Each of the four users of the grammar: what its messages say.
TEST(SpecUsers, FormatMessages) {
  std::string err;
  EXPECT_FALSE(parse_format("e4m3:nosub:wat", &err));
  EXPECT_EQ(err, "format 'e4m3:nosub:wat': unknown option 'wat'; allowed: bias=B, nosub, ieee, nanonly, finite, "
                 "fnuz, unsigned (column 12)");
  EXPECT_FALSE(parse_format("e4m3:ieee:fnuz", &err));
  EXPECT_NE(err.find("exclude each other"), std::string::npos);
  EXPECT_FALSE(parse_format("e4m3:bias=+-3", &err));
  EXPECT_NE(err.find("bad bias '+-3'"), std::string::npos);
  EXPECT_EQ(format_by_name("e4m3:bias=+8").bias, 8);
  EXPECT_FALSE(parse_format("e4m3 ", &err));
  EXPECT_NE(err.find("whitespace (column 5)"), std::string::npos);
}

TEST(SpecUsers, SchemeMessages) {
  EXPECT_EQ(error_of([] { parse_block_scaling("mxfp4:rule=round"); }),
            "scheme 'mxfp4:rule=round': rule 'round' is unknown; allowed: floor, ceil, even, rceil (column 7)");
  EXPECT_NE(error_of([] { parse_block_scaling("nvfp4:foo"); }).find("'foo' is not understood"), std::string::npos);
  EXPECT_NE(error_of([] { parse_block_scaling("mxfp4:block=0"); }).find("block=0 is not an integer in 1..1048576"),
            std::string::npos);
}

TEST(SpecUsers, AccumModelMessagesAndOverrides) {
  EXPECT_EQ(error_of([] { parse_accum_model("block:n"); }), "accumulation model 'block:n': 'n' is not key=value (column 7)");
  EXPECT_NE(error_of([] { parse_accum_model("block:n=abc"); }).find("'n=abc' is not an integer (column 7)"),
            std::string::npos);
  // to_spec's output with a key appended: the later key wins (the dot command relies on it).
  const AccumModel m = parse_accum_model(to_spec(parse_accum_model("fp32-fma")) + ":acc=bf16");
  EXPECT_EQ(m.acc.name, "bf16");
  EXPECT_TRUE(m.fma);
}

TEST(SpecUsers, DistributionMessagesAndBothSeparators) {
  EXPECT_EQ(parse_distribution("uniform:low=0,high=2").params.at("high"), 2);
  EXPECT_EQ(parse_distribution("uniform:low=0:high=2").params.at("high"), 2);
  EXPECT_NE(error_of([] { parse_distribution("normal:sd=2"); }).find("'sd=2' is not a parameter of normal"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_distribution("normal:std=1,std=2"); }).find("'std' given twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_distribution("normal,std=2"); }).find("expected ':' after the name normal"),
            std::string::npos);
}

}  // namespace
}  // namespace precsim

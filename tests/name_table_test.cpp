// One name table per enum serves to_string and parsing: every name round-trips, and an unknown
// name is refused with every allowed one listed.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "precsim/formats/name_table.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/parallel/allreduce.h"

namespace precsim {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr auto kColors = name_table<Color>({{Color::kRed, "red"}, {Color::kGreen, "green"}});

TEST(NameTable, NamesParsesAndListsTheAllowedNames) {
  static_assert(kColors.entries.size() == 2);
  static_assert(kColors.name(Color::kGreen) == "green");
  EXPECT_EQ(kColors.name(Color::kBlue), "?");  // a value the table does not name
  EXPECT_EQ(kColors.parse("red", "color"), Color::kRed);
  EXPECT_EQ(kColors.allowed(), "red, green");
  try {
    kColors.parse("blue", "color");
    FAIL() << "parsed an unknown name";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown color 'blue'; allowed: red, green");
  }
}

TEST(NameTable, LibraryEnumsRoundTrip) {
  for (const char* n : {"nearest-even", "nearest-away", "toward-zero", "up", "down", "odd", "stochastic",
                        "stochastic-a", "stochastic-b", "stochastic-c"})
    EXPECT_EQ(to_string(parse_rounding(n)), n);
  for (const char* n : {"ieee", "saturate", "satfinite", "satpropagate", "satnone"})
    EXPECT_EQ(to_string(parse_overflow(n)), n);
  // P3109's spelling of its saturation modes (§4.2).
  EXPECT_EQ(parse_overflow("SatPropagate"), Overflow::kSatPropagate);
  for (const char* n : {"ring", "tree", "naive", "fp32-accumulate"}) EXPECT_EQ(to_string(parse_allreduce_algorithm(n)), n);
  for (const char* n : {"sum", "ddp", "nccl-avg", "post-divide", "fsdp"}) EXPECT_EQ(to_string(parse_average_mode(n)), n);
  for (const char* n : {"none", "bf16", "fp16"}) EXPECT_EQ(to_string(parse_compress_hook(n)), n);
  try {
    parse_overflow("wrap");
    FAIL() << "parsed an unknown overflow mode";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown overflow mode 'wrap'; allowed: ieee, saturate, satfinite, satpropagate, satnone");
  }
}

}  // namespace
}  // namespace precsim

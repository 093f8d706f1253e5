// libFuzzer target for the NAME[:k=v...] grammar (formats/spec.h) and the four families read with
// it: formats, block-scaling schemes, accumulation models and distributions. The first byte picks
// the family ('f', 'b', 'a', 'd', 's' for the bare grammar; any other byte: all of them), the rest
// is the spec. Each must end in a value or in std::invalid_argument (the documented error); any
// other exception, a crash or a sanitizer report is a bug. What parses must read back to itself:
// a format's and a scheme's name, an accumulation model's to_spec, an option's column.
// tests/spec_fuzz_test.cpp replays tests/fuzz/spec_corpus/.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/formats/spec.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/data/distributions.h"

namespace precsim_fuzz {

inline void fuzz_format(std::string_view text) {
  std::string error;
  const auto f = precsim::parse_format(text, &error);
  if (!f) {
    if (error.empty()) std::abort();  // a refusal always says why
    return;
  }
  if (!precsim::same_encoding(precsim::format_by_name(f->name), *f)) std::abort();
}

inline void fuzz_block_scheme(std::string_view text) {
  const precsim::BlockScaling b = precsim::parse_block_scaling(text);
  if (!(precsim::parse_block_scaling(b.name) == b)) std::abort();
}

inline void fuzz_accum_model(std::string_view text) {
  const precsim::AccumModel m = precsim::parse_accum_model(text);
  precsim::AccumModel back = precsim::parse_accum_model(precsim::to_spec(m));
  back.name = m.name, back.source = m.source, back.description = m.description;
  if (!(back == m)) std::abort();
}

inline void fuzz_bare_spec(std::string_view text, const precsim::SpecSyntax& syntax) {
  const precsim::Spec s = precsim::parse_spec(text, syntax);
  for (const precsim::SpecOption& o : s.options)
    if (o.column < 1 || text.substr(o.column - 1, o.text.size()) != o.text) std::abort();
}

// One family; its documented error ends the input.
template <class F>
void guarded(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace precsim_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace precsim_fuzz;
  if (size == 0) return 0;
  const char family = static_cast<char>(data[0]);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool all = std::string_view("fbads").find(family) == std::string_view::npos;
  if (all || family == 'f') guarded([&] { fuzz_format(text); });
  if (all || family == 'b') guarded([&] { fuzz_block_scheme(text); });
  if (all || family == 'a') guarded([&] { fuzz_accum_model(text); });
  if (all || family == 'd') guarded([&] { precsim::parse_distribution(text); });
  if (all || family == 's') {
    guarded([&] { fuzz_bare_spec(text, {}); });
    guarded([&] { fuzz_bare_spec(text, {.what = "distribution", .separators = ":,", .later_key_overrides = true}); });
  }
  return 0;
}

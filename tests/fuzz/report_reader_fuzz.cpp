// libFuzzer target for the report reader and everything `precsim report` does with what it read.
// Any input must end in a parsed report or in one of the documented errors; any other exception,
// crash or sanitizer finding is a bug. scripts/fuzz.sh runs it under libFuzzer (clang);
// tests/report_fuzz_test.cpp replays tests/fuzz/corpus/ in the default test run.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <nlohmann/json.hpp>

#include "precsim/reports/check.h"
#include "precsim/reports/diff.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace precsim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc;
  try {
    doc = parse_report_text(text, "fuzz");
  } catch (const ReportError&) {
    return 0;
  }
  try {
    parse_check_rules(doc);  // the same bytes as a rules file
  } catch (const std::invalid_argument&) {
  }
  try {
    check_envelope(doc, "fuzz");
  } catch (const ReportError&) {
    return 0;
  }
  validate_report(doc);
  summarize_report(doc);
  diff_reports(doc, doc);
  check_report(doc, doc, {});
  check_report(doc, doc, {}, tolerance_rule(1e-3, 0));
  return 0;
}

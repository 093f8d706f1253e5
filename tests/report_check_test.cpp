// report check, diff, summary, export and the reader, on small synthetic reports whose expected
// outcomes are known by construction.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "precsim/reports/check.h"
#include "precsim/reports/diff.h"
#include "precsim/reports/export_csv.h"
#include "precsim/reports/json_path.h"
#include "precsim/reports/read_report.h"
#include "precsim/reports/report.h"
#include "precsim/reports/summary.h"

namespace precsim {
namespace {

using nlohmann::json;

json make(const json& results, const json& config = {{"recipe", "bf16-amp"}, {"steps", 4}}, const std::string& kind = "train") {
  Report r(kind);
  r.config() = config;
  r.seeds() = {{"data", 1}};
  r.results() = results;
  json d = r.document(true);
  check_envelope(d, "test");
  return d;
}

json base_results() {
  return {{"loss", {{"step", {0, 1, 2, 3}}, {"value", {2.0, 1.5, 1.25, 1.0}}}},
          {"final", {{"qsnr_db", 30.0}, {"value_hex", "0x1p+0"}, {"max_abs", 1.0}}},
          {"ensemble", {1.0, 1.1, 0.9, 1.0}},
          {"codes", {"0x3a", "0x3b"}}};
}

CheckRules rules(const json& j) { return parse_check_rules(j); }

std::vector<std::string> failed_paths(const CheckOutcome& o) {
  std::vector<std::string> p;
  for (const auto& f : o.failures) p.push_back(f.path);
  return p;
}

TEST(Check, AReportPassesAgainstItself) {
  const json b = make(base_results());
  const auto o = check_report(b, b, {});
  EXPECT_TRUE(o.passed());
  EXPECT_GE(o.compared, 6u);
}

TEST(Check, WithoutRulesEveryDifferenceFailsAndIsNamed) {
  json r = base_results();
  r["final"]["qsnr_db"] = 30.000000000000004;  // one ulp of double
  r["loss"]["value"][2] = 1.2500000000000002;
  const auto o = check_report(make(base_results()), make(r), {});
  EXPECT_EQ(failed_paths(o), (std::vector<std::string>{"results.final.qsnr_db", "results.loss.value"}));
  EXPECT_NE(o.failures[1].message.find("index 2"), std::string::npos) << o.failures[1].message;
}

TEST(Check, ExactModeTellsMinusZeroFromZero) {
  json r = base_results();
  r["final"]["max_abs"] = -0.0;
  json b = base_results();
  b["final"]["max_abs"] = 0.0;
  EXPECT_EQ(failed_paths(check_report(make(b), make(r), {})), std::vector<std::string>{"results.final.max_abs"});
}

TEST(Check, DigestsAreRecomputedNotTrusted) {
  json b = make(base_results());
  json r = b;
  r["results"]["final"]["qsnr_db"] = 31.0;  // edited without updating the digest
  const auto o = check_report(b, r, {});
  ASSERT_FALSE(o.passed());
  EXPECT_EQ(o.failures[0].path, "digest");
  EXPECT_NE(o.failures[0].message.find("run"), std::string::npos);
}

TEST(Check, BitwiseMode) {
  const auto rs = rules({{"rules", {{{"path", "results.final.value_hex"}, {"mode", "bitwise"}}}}});
  json r = base_results();
  EXPECT_TRUE(check_report(make(base_results()), make(r), rs).passed());
  r["final"]["value_hex"] = "0x1.0000000000001p+0";
  EXPECT_EQ(failed_paths(check_report(make(base_results()), make(r), rs)), std::vector<std::string>{"results.final.value_hex"});
}

TEST(Check, UlpsModeCountsCodesOfTheNamedFormat) {
  // bf16 has 7 fraction bits: 1 + 2^-7 is the next value after 1, 1 + 2^-6 two codes away.
  const auto rs = rules({{"rules", {{{"path", "results.final.max_abs"}, {"mode", "ulps"}, {"format", "bf16"}, {"ulps", 1}}}}});
  json r = base_results();
  r["final"]["max_abs"] = 1.0 + std::ldexp(1.0, -7);
  EXPECT_TRUE(check_report(make(base_results()), make(r), rs).passed());
  r["final"]["max_abs"] = 1.0 + std::ldexp(1.0, -6);
  const auto o = check_report(make(base_results()), make(r), rs);
  ASSERT_EQ(failed_paths(o), std::vector<std::string>{"results.final.max_abs"});
  EXPECT_NE(o.failures[0].message.find("2 ulps of bf16 apart"), std::string::npos) << o.failures[0].message;
}

TEST(Check, ToleranceModeOnASeriesAndOnItsReductions) {
  json r = base_results();
  r["loss"]["value"] = {2.0, 1.6, 1.25, 1.0005};  // final within 1e-3 relative, step 1 off by 0.1
  const json b = make(base_results());
  auto rule = [](const char* reduce, double rtol) {
    json j = {{"path", "results.loss"}, {"mode", "tolerance"}, {"rtol", rtol}};
    if (reduce) j["reduce"] = reduce;
    return rules({{"rules", {j}}});
  };
  EXPECT_TRUE(check_report(b, make(r), rule("final", 1e-3)).passed());
  EXPECT_FALSE(check_report(b, make(r), rule("final", 1e-4)).passed());
  EXPECT_FALSE(check_report(b, make(r), rule(nullptr, 1e-3)).passed());  // whole series: step 1 fails
  EXPECT_TRUE(check_report(b, make(r), rule(nullptr, 0.07)).passed());
  // mean of baseline 1.6875, of run 1.7126...: 1.5% apart
  EXPECT_TRUE(check_report(b, make(r), rule("mean", 0.02)).passed());
  EXPECT_FALSE(check_report(b, make(r), rule("mean", 0.01)).passed());
  EXPECT_TRUE(check_report(b, make(r), rule("max", 0)).passed());  // both maxima are 2.0
  const auto o = check_report(b, make(r), rule("final", 1e-4));
  EXPECT_EQ(o.failures[0].path, "results.loss (final)");
}

TEST(Check, DefaultToleranceAppliesToNumbersNoRuleNames) {
  json r = base_results();
  r["final"]["qsnr_db"] = 30.001;
  EXPECT_TRUE(check_report(make(base_results()), make(r), {}, tolerance_rule(1e-4, 0)).passed());
  EXPECT_FALSE(check_report(make(base_results()), make(r), {}, tolerance_rule(1e-6, 0)).passed());
}

TEST(Check, StatisticalModeComparesSeedIntervals) {
  const auto rs = rules({{"rules", {{{"path", "results.ensemble"}, {"mode", "statistical"}, {"sigmas", 2}}}}});
  // Baseline: mean 1.0, s = 0.0816, se = 0.0408, 2 sigmas: [0.918, 1.082].
  json r = base_results();
  r["ensemble"] = {1.1, 1.2, 1.0, 1.1};  // mean 1.1, se 0.0408: [1.018, 1.182] overlaps
  EXPECT_TRUE(check_report(make(base_results()), make(r), rs).passed());
  r["ensemble"] = {1.3, 1.4, 1.2, 1.3};  // [1.218, 1.382] does not
  const auto o = check_report(make(base_results()), make(r), rs);
  ASSERT_EQ(failed_paths(o), std::vector<std::string>{"results.ensemble"});
  EXPECT_NE(o.failures[0].message.find("do not overlap"), std::string::npos);
  // Per-seed series are reduced first.
  const auto rs_final = rules({{"rules", {{{"path", "results.ens"}, {"mode", "statistical"}, {"reduce", "final"}}}}});
  json bs = {{"ens", {{5.0, 1.0}, {5.0, 1.1}}}};
  json xs = {{"ens", {{9.0, 1.05}, {9.0, 1.0}}}};
  EXPECT_TRUE(check_report(make(bs), make(xs), rs_final).passed());
  xs = {{"ens", {{9.0, 3.0}, {9.0, 3.1}}}};
  EXPECT_FALSE(check_report(make(bs), make(xs), rs_final).passed());
}

TEST(Check, IgnoreAndWildcards) {
  json r = base_results();
  r["final"]["qsnr_db"] = 1.0;
  r["final"]["max_abs"] = 2.0;
  EXPECT_TRUE(check_report(make(base_results()), make(r), rules({{"rules", {{{"path", "results.final.*"}, {"mode", "ignore"}}}}})).passed());
  EXPECT_TRUE(check_report(make(base_results()), make(r), rules({{"rules", {{{"path", "results.**"}, {"mode", "ignore"}}}}})).passed());
  EXPECT_EQ(failed_paths(check_report(make(base_results()), make(r), rules({{"rules", {{{"path", "results.*.qsnr_*"}, {"mode", "ignore"}}}}}))),
            std::vector<std::string>{"results.final.max_abs"});
}

TEST(Check, RefusesAnotherKindSchemaOrConfiguration) {
  const json b = make(base_results());
  EXPECT_THROW(check_report(b, make(base_results(), b["config"], "gemm"), {}), CheckRefused);
  json other_schema = b;
  other_schema["schema"] = "precsim.report/2";
  EXPECT_THROW(check_report(b, other_schema, {}), CheckRefused);
  const json r = make(base_results(), {{"recipe", "fp16-amp"}, {"steps", 4}, {"lr", 0.1}});
  try {
    check_report(b, r, {});
    FAIL() << "not refused";
  } catch (const CheckRefused& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("config.recipe (baseline \"bf16-amp\", run \"fp16-amp\")"), std::string::npos) << m;
    EXPECT_NE(m.find("config.lr (baseline absent, run 0.1)"), std::string::npos) << m;
  }
  EXPECT_TRUE(check_report(b, r, rules({{"allow_config", {"config.recipe", "config.lr"}}})).passed());
}

TEST(Check, AnInterruptedRunFails) {
  json r = make(base_results());
  r["status"] = "interrupted";
  EXPECT_EQ(failed_paths(check_report(make(base_results()), r, {})), std::vector<std::string>{"status"});
}

TEST(CheckRulesFile, BadRulesAreNamed) {
  auto msg = [](const json& j) {
    try {
      parse_check_rules(j);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(msg({{"rules", {{{"path", "results.x"}, {"mode", "fuzzy"}}}}}),
            "rules[0].mode: 'fuzzy' is not one of bitwise, exact, ignore, statistical, tolerance, ulps");
  EXPECT_NE(msg({{"rules", {{{"path", "results.x"}, {"mode", "ulps"}, {"format", "e9m9x"}, {"ulps", 1}}}}}).find("rules[0].format"),
            std::string::npos);
  EXPECT_EQ(msg({{"rules", {{{"path", "results.x"}, {"mode", "ulps"}, {"format", "bf16"}}}}}),
            "rules[0].ulps: mode ulps needs the allowed distance in ulps");
  EXPECT_EQ(msg({{"rules", {{{"path", "results.x"}, {"mode", "tolerance"}}}}}), "rules[0]: mode tolerance needs rtol and/or atol");
  EXPECT_EQ(msg({{"rules", {{{"path", "results.x"}, {"mode", "exact"}, {"rtol", 1}}}}}), "rules[0].rtol: does not apply to mode exact");
  EXPECT_NE(msg({{"rules", {{{"path", "config.x"}, {"mode", "exact"}}}}}).find("must start with results"), std::string::npos);
  EXPECT_NE(msg({{"rulez", json::array()}}).find("unknown key 'rulez'"), std::string::npos);
  EXPECT_NE(msg({{"rules", {{{"path", "results.x"}, {"mode", "tolerance"}, {"rtol", -1}}}}}).find("rules[0].rtol"), std::string::npos);
}

TEST(Reader, ClearErrorsForBadFiles) {
  auto err = [](std::string_view text) {
    try {
      check_envelope(parse_report_text(text, "r.json"), "r.json");
    } catch (const ReportError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string good = make(base_results()).dump();
  EXPECT_EQ(err(good), "accepted");
  EXPECT_NE(err(good.substr(0, good.size() / 2)).find("truncated JSON"), std::string::npos);
  EXPECT_NE(err("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(err("").find("empty"), std::string::npos);
  // Found by the fuzzer: nlohmann throws out_of_range, not parse_error, for a number beyond double.
  EXPECT_NE(err("{\"x\": 1e999}").find("number overflow parsing '1e999'"), std::string::npos);
  EXPECT_NE(err("[1, 2]").find("JSON array, not an object"), std::string::npos);
  EXPECT_NE(err("{\"a\": 1}").find("no \"schema\" field"), std::string::npos);
  json d = json::parse(good);
  d["schema"] = "precsim.report/9";
  EXPECT_NE(err(d.dump()).find("schema 'precsim.report/9' is not supported"), std::string::npos);
  d["schema"] = "precsim.report/1";
  d["kind"] = "trian";
  EXPECT_NE(err(d.dump()).find("unknown report kind 'trian'"), std::string::npos);
  d["kind"] = "gpu-gemm";
  EXPECT_EQ(err(d.dump()), "accepted");
  d["results"] = json::array();
  EXPECT_NE(err(d.dump()).find("\"results\" must be an object"), std::string::npos);
  EXPECT_THROW(read_json_file("/nonexistent/r.json"), ReportError);
}

TEST(Validate, DigestAndKindRules) {
  json d = make(base_results());
  EXPECT_TRUE(validate_report(d).empty());
  d["results"]["final"]["qsnr_db"] = 0;
  ASSERT_EQ(validate_report(d).size(), 1u);
  EXPECT_EQ(validate_report(d)[0].rfind("digest:", 0), 0u);
  json f = make({{"formats", {{{"name", "x"}}}}}, json::object(), "formats");
  const auto problems = validate_report(f);
  EXPECT_NE(problems.at(0).find("results.formats.0: missing \"aliases\""), std::string::npos);
}

TEST(Diff, NamesEachDifferingMetricAndSummarisesSeries) {
  json r = base_results();
  r["loss"]["value"][3] = 0.5;
  r["final"]["qsnr_db"] = 29.0;
  const auto d = diff_reports(make(base_results()), make(r, {{"recipe", "fp16-amp"}, {"steps", 4}}));
  ASSERT_EQ(d.config.size(), 1u);
  EXPECT_EQ(d.config[0].path, "config.recipe");
  ASSERT_EQ(d.results.size(), 2u);
  EXPECT_EQ(d.results[0].path, "results.final.qsnr_db");
  EXPECT_EQ(d.results[1].path, "results.loss.value");
  EXPECT_NE(d.results[1].a.find("1 of 4 entries differ; largest |diff| 0.5 at index 3"), std::string::npos) << d.results[1].a;
  EXPECT_TRUE(diff_reports(make(base_results()), make(base_results())).same());
}

TEST(Summary, TablesSeriesAndScalars) {
  json res = base_results();
  res["rows"] = {{{"format", "e4m3"}, {"qsnr", 30.5}}, {{"format", "e5m2"}, {"qsnr", "nan"}}};
  const std::string s = summarize_report(make(res), {.max_rows = 1});
  EXPECT_NE(s.find("train report (complete)"), std::string::npos) << s;
  EXPECT_NE(s.find("matches the results"), std::string::npos);
  EXPECT_NE(s.find("loss: series of 4 points, steps 0..3: first 2 last 1 min 1 max 2 mean 1.4375"), std::string::npos) << s;
  EXPECT_NE(s.find("e4m3"), std::string::npos);
  EXPECT_EQ(s.find("e5m2"), std::string::npos);  // beyond --rows
  EXPECT_NE(s.find("1 more rows"), std::string::npos);
  EXPECT_NE(s.find("recipe = bf16-amp"), std::string::npos);
}

TEST(ExportCsv, TablesSeriesAndScalars) {
  json res = base_results();
  res["rows"] = {{{"format", "e4m3"}, {"note", "a,\"b\""}}, {{"format", "e5m2"}, {"qsnr", "nan"}}};
  const auto dir = std::filesystem::temp_directory_path() / ("precsim_csv_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto files = export_csv(make(res), dir);
  EXPECT_EQ(files, (std::vector<std::string>{"config.csv", "ensemble.csv", "loss.csv", "rows.csv", "scalars.csv"}));
  auto read = [&](const char* f) {
    std::ifstream in(dir / f);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read("loss.csv"), "step,value\n0,2.0\n1,1.5\n2,1.25\n3,1.0\n");
  EXPECT_EQ(read("rows.csv"), "format,note,qsnr\ne4m3,\"a,\"\"b\"\"\",\ne5m2,,nan\n");
  EXPECT_NE(read("scalars.csv").find("results.final.value_hex,0x1p+0\n"), std::string::npos);
  EXPECT_NE(read("config.csv").find("config.recipe,bf16-amp\n"), std::string::npos);
  EXPECT_NE(read("config.csv").find("seeds.data,1\n"), std::string::npos);
}

TEST(JsonPath, Patterns) {
  EXPECT_TRUE(path_matches("results.*.loss", "results.a.loss"));
  EXPECT_FALSE(path_matches("results.*.loss", "results.a.b.loss"));
  EXPECT_TRUE(path_matches("results.**.loss", "results.a.b.loss"));
  EXPECT_TRUE(path_matches("results.**.loss", "results.loss"));
  EXPECT_TRUE(path_matches("results.values.[0-2].value", "results.values.1.value"));
  EXPECT_FALSE(path_matches("results.values.[0-2].value", "results.values.3.value"));
  EXPECT_TRUE(is_numeric(json("0x1.8p-24")));
  EXPECT_FALSE(is_numeric(json("0x3a")));
  EXPECT_EQ(numeric_value(json("0x1.8p-24")), 0x1.8p-24);
  // Found by the fuzzer: text that starts like a hex-float but does not parse as one is text.
  EXPECT_FALSE(is_numeric(json("0x1.80000p8+1")));
  EXPECT_THROW(numeric_value(json("0x1.80000p8+1")), std::invalid_argument);
}

TEST(Check, HexFloatLookalikeTextIsComparedAsText) {
  json b = base_results();
  b["final"]["value_hex"] = "0x1.80000p8+1";
  EXPECT_TRUE(check_report(make(b), make(b), {}).passed());
  json r = b;
  r["final"]["value_hex"] = "0x1.80000p8+2";
  EXPECT_EQ(failed_paths(check_report(make(b), make(r), {})), std::vector<std::string>{"results.final.value_hex"});
}

}  // namespace
}  // namespace precsim

// Library pieces for long runs: series decimation, full series in .npy, JSON Lines streaming,
// and the interrupt flag.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "precsim/reports/interrupt.h"
#include "precsim/reports/jsonl.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/report.h"
#include "precsim/reports/series.h"

namespace precsim {
namespace {

std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("precsim_series_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

TEST(SeriesLog, AutomaticStrideKeepsAtMostMaxPointsAndTheLastStep) {
  for (int64_t total : {1, 999, 1000, 1001, 2000, 10000, 123457}) {
    SeriesLog log({}, total);
    for (int64_t s = 0; s < total; ++s) log.record("loss", s, static_cast<double>(s) * 0.5);
    const auto j = log.to_json();
    const auto& steps = j["series"]["loss"]["step"];
    const auto& values = j["series"]["loss"]["value"];
    SCOPED_TRACE(total);
    EXPECT_LE(steps.size(), 1000u);
    EXPECT_EQ(steps.size(), values.size());
    EXPECT_EQ(steps.back().get<int64_t>(), total - 1);  // final is exact
    EXPECT_EQ(values.back().get<double>(), static_cast<double>(total - 1) * 0.5);
    const int64_t k = j["log_every"].get<int64_t>();
    for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_EQ(steps[i].get<int64_t>(), static_cast<int64_t>(i) * k);
    if (total <= 1000) EXPECT_EQ(k, 1);
    else EXPECT_GE(steps.size(), 500u);  // the stride is not wastefully coarse
  }
}

TEST(SeriesLog, ExplicitStrideAndNonFiniteValues) {
  SeriesLog log({.log_every = 3}, 8);
  for (int64_t s = 0; s < 8; ++s) log.record("g", s, s == 6 ? NAN : (s == 7 ? -INFINITY : 1.0 * s));
  const auto j = log.to_json();
  EXPECT_EQ(j["series"]["g"]["step"], nlohmann::json({0, 3, 6, 7}));
  EXPECT_EQ(j["series"]["g"]["value"], nlohmann::json({0.0, 3.0, "nan", "-inf"}));
}

TEST(SeriesLog, RejectsBadInput) {
  EXPECT_THROW(SeriesLog({.log_every = -1}, 10), std::invalid_argument);
  EXPECT_THROW(SeriesLog({.max_points = 1}, 10), std::invalid_argument);
  SeriesLog log({}, 10);
  log.record("a", 3, 1.0);
  EXPECT_THROW(log.record("a", 3, 1.0), std::invalid_argument);
  EXPECT_THROW(log.record("a/b", 4, 1.0), std::invalid_argument);
  EXPECT_THROW(log.write_npy(temp_dir() / "r.json"), std::logic_error);
}

TEST(SeriesLog, FullSeriesGoesToNpyBesideTheReport) {
  SeriesLog log({.max_points = 4, .full_npy = true}, 10);
  for (int64_t s = 0; s < 10; ++s) log.record("loss", s, 1.0 / (s + 1));
  const auto dir = temp_dir();
  const auto files = log.write_npy(dir / "run.json");
  ASSERT_EQ(files["loss"], "run.loss.npy");
  const NpyArray a = read_npy(dir / "run.loss.npy");
  EXPECT_EQ(a.descr, "<f8");
  ASSERT_EQ(a.shape, (std::vector<size_t>{10, 2}));
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(a.as<double>()[2 * s], s);
    EXPECT_EQ(a.as<double>()[2 * s + 1], 1.0 / (s + 1));
  }
  EXPECT_LE(log.to_json()["series"]["loss"]["step"].size(), 4u);
}

TEST(Jsonl, WritesHeaderAndWholeLinesAndSkipsAnIncompleteLastLine) {
  const auto path = temp_dir() / "run.jsonl";
  {
    JsonlWriter w(path, {{"kind", "train"}, {"config", {{"steps", 3}}}});
    for (int s = 0; s < 3; ++s) w.write({{"step", s}, {"loss", json_number(s == 2 ? NAN : 1.5 * s)}});
    EXPECT_EQ(w.lines(), 4u);
  }
  auto c = read_jsonl(path);
  EXPECT_EQ(c.header["schema"], "precsim.jsonl/1");
  EXPECT_EQ(c.header["kind"], "train");
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(c.records[1]["loss"].get<double>(), 1.5);
  EXPECT_EQ(c.records[2]["loss"], "nan");
  EXPECT_FALSE(c.truncated);
  std::ofstream(path, std::ios::app) << "{\"step\": 3, \"lo";
  c = read_jsonl(path);
  EXPECT_EQ(c.records.size(), 3u);
  EXPECT_TRUE(c.truncated);
  std::ofstream(path, std::ios::app) << "\n";  // now a complete but malformed line
  EXPECT_THROW(read_jsonl(path), std::invalid_argument);
  EXPECT_THROW(read_jsonl(temp_dir() / "missing.jsonl"), std::invalid_argument);
}

TEST(Interrupt, SignalSetsTheFlagAndTheGuardRestoresHandlers) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  {
    InterruptGuard guard;
    EXPECT_FALSE(guard.requested());
    std::raise(SIGTERM);
    EXPECT_TRUE(guard.requested());
    EXPECT_TRUE(interrupt_requested());
    EXPECT_EQ(guard.signal(), SIGTERM);
    EXPECT_EQ(guard.exit_code(), 128 + SIGTERM);
  }
  {
    InterruptGuard guard;  // a new guard starts clear
    EXPECT_FALSE(guard.requested());
    std::raise(SIGINT);
    EXPECT_EQ(guard.exit_code(), 130);
  }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(Interrupt, ASecondSignalKillsTheProcess) {
  EXPECT_EXIT(
      {
        InterruptGuard guard;
        std::raise(SIGINT);
        std::raise(SIGINT);
        std::exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "");
}

}  // namespace
}  // namespace precsim

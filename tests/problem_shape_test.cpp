// The sizes check_config, memory_estimate and search read from the configuration alone
// (problem_shape.h, data_shape, seq_data_shape) against the data sets and problems that
// run_training builds: generated, npy and text data, classification and regression, several
// models; and the same error as building the data for a bad configuration.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/reports/npy.h"
#include "precsim/sim/data/data.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/experiment/problem_shape.h"
#include "precsim/sim/experiment/runner.h"
#include "precsim/sim/data/data_json.h"

namespace precsim {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

class ShapeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("precsim_shape_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A (rows, cols) float array of small distinct values; cols 0 makes it 1-D.
  std::string floats(const std::string& name, size_t rows, size_t cols) {
    std::vector<float> v(rows * (cols ? cols : 1));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 17) / 8.0f - 1.0f;
    const auto path = dir_ / name;
    write_npy(path, "<f4", cols ? std::vector<size_t>{rows, cols} : std::vector<size_t>{rows}, v.data(), v.size() * 4);
    return path.string();
  }
  std::string labels(const std::string& name, size_t rows, int classes) {
    std::vector<int32_t> y(rows);
    for (size_t i = 0; i < rows; ++i) y[i] = int32_t(i % size_t(classes));
    const auto path = dir_ / name;
    write_npy(path, "<i4", {rows}, y.data(), y.size() * 4);
    return path.string();
  }
  std::string text(const std::string& name, const std::string& body) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << body;
    return path.string();
  }
  std::filesystem::path dir_;
};

void expect_same_data(const DataConfig& d) {
  SCOPED_TRACE(data_config_to_json(d).dump());
  const DataShape s = data_shape(d);
  const Dataset ds = make_dataset(d, 3);
  EXPECT_EQ(s.task, ds.task);
  EXPECT_EQ(s.features, ds.features);
  EXPECT_EQ(s.outputs, ds.outputs);
  EXPECT_EQ(s.train_rows, ds.train_count());
  EXPECT_EQ(s.heldout_rows, ds.heldout_count());
}

// The problem run_training builds has the layout (its parameter count) the shape gives.
void expect_same_problem(const json& cfg) {
  SCOPED_TRACE(cfg.dump());
  json one = cfg;
  one["steps"] = 1;
  one["recipes"] = {"fp32"};
  const TrainConfig c = train_config_from_json(one);
  const bool transformer = c.model_type == ModelKind::kTransformer;
  const size_t params = transformer ? transformer_shape(c).layout.param_count : mlp_shape(c).layout.param_count;
  EXPECT_GT(params, 0u);
  EXPECT_EQ(run_training(c).parameters, params);
}

TEST_F(ShapeFiles, GeneratedDataHasTheShapeOfItsConfiguration) {
  DataConfig gm;
  gm.features = 7;
  gm.classes = 3;
  gm.train_size = 50;
  gm.heldout_size = 11;
  expect_same_data(gm);
  DataConfig ts = gm;
  ts.kind = DataKind::kTeacherStudent;
  ts.outputs = 4;
  expect_same_data(ts);
  const DataShape s = data_shape(ts);
  EXPECT_EQ(s.task, Task::kRegression);
  EXPECT_EQ(s.outputs, 4);
  EXPECT_EQ(s.train_rows, 50);
}

TEST_F(ShapeFiles, NpyDataHasTheShapeOfItsFiles) {
  DataConfig cls;
  cls.kind = DataKind::kNpy;
  cls.classes = 4;
  cls.features_path = floats("x.npy", 50, 5);
  cls.labels_path = labels("y.npy", 50, 4);
  expect_same_data(cls);
  EXPECT_EQ(data_shape(cls).train_rows, 40);  // 50 - floor(50 x 0.2)
  DataConfig reg = cls;
  reg.labels_path = floats("t.npy", 50, 2);
  reg.heldout_fraction = 0.3;
  expect_same_data(reg);
  EXPECT_EQ(data_shape(reg).outputs, 2);
  EXPECT_EQ(data_shape(reg).train_rows, 35);
  reg.labels_path = floats("t1.npy", 50, 0);
  reg.heldout_fraction = 0.0;
  expect_same_data(reg);
  EXPECT_EQ(data_shape(reg).outputs, 1);
  EXPECT_EQ(data_shape(reg).heldout_rows, 0);
}

TEST_F(ShapeFiles, SequenceDataHasTheShapeOfItsConfiguration) {
  SeqDataConfig copy;
  copy.train_size = 30;
  copy.heldout_size = 7;
  SeqDataConfig modadd = copy;
  modadd.kind = SeqTask::kModAdd;
  modadd.symbols = 5;
  SeqDataConfig txt = copy;
  txt.kind = SeqTask::kText;
  txt.text_path = text("a.txt", std::string(200, 'a') + "bcdefg hij\n" + std::string(100, 'z'));
  for (const SeqDataConfig& d : {copy, modadd, txt}) {
    SCOPED_TRACE(std::string(to_string(d.kind)));
    const SeqDataShape s = seq_data_shape(d, 16);
    const SeqDataset ds = make_seq_dataset(d, 16, 5);
    EXPECT_EQ(s.vocab, ds.vocab);
    EXPECT_EQ(s.train_rows, ds.train_rows);
    EXPECT_EQ(s.heldout_rows, ds.heldout_rows);
  }
  EXPECT_EQ(seq_data_shape(copy, 16).vocab, 12);
  EXPECT_EQ(seq_data_shape(modadd, 16).vocab, 7);
  EXPECT_EQ(seq_data_shape(txt, 16).vocab, 13);  // a-j, space, newline, z
}

TEST_F(ShapeFiles, ProblemsHaveTheLayoutOfTheirShape) {
  const json small = {{"train_size", 64}, {"heldout_size", 16}};
  expect_same_problem({{"batch", 16}, {"data", small}});
  expect_same_problem({{"batch", 16}, {"data", {{"kind", "teacher-student"}, {"outputs", 3}, {"features", 9},
                                                {"train_size", 64}, {"heldout_size", 16}}},
                       {"model", {{"hidden", {16}}, {"layernorm", true}}}});
  expect_same_problem({{"batch", 16}, {"data", small}, {"model", {{"hidden", {8, 8, 8}}, {"batchnorm", true}, {"residual", true}}}});
  expect_same_problem({{"batch", 16},
                       {"data", {{"kind", "npy"}, {"classes", 4}, {"features_path", floats("x.npy", 50, 5)},
                                 {"labels_path", labels("y.npy", 50, 4)}}}});
  expect_same_problem({{"batch", 16},
                       {"data", {{"kind", "npy"}, {"features_path", floats("x.npy", 50, 5)},
                                 {"labels_path", floats("t.npy", 50, 3)}}}});
  const json tiny = {{"type", "transformer"}, {"layers", 1}, {"heads", 2}, {"width", 16}, {"context", 16}};
  expect_same_problem({{"batch", 8}, {"model", tiny}, {"data", {{"train_size", 32}, {"heldout_size", 8}}}});
  json two = tiny;
  two["layers"] = 2;
  two["tied"] = false;
  expect_same_problem({{"batch", 8}, {"model", two}, {"data", {{"kind", "modadd"}, {"symbols", 7}, {"train_size", 32},
                                                               {"heldout_size", 8}}}});
  expect_same_problem({{"batch", 8}, {"model", tiny},
                       {"data", {{"kind", "text"}, {"text_path", text("t.txt", std::string(300, 'q') + "rstuvw\n")},
                                 {"train_size", 32}, {"heldout_size", 8}}}});
}

// check_config reads the training set's rows from the shape: an npy set of 50 rows trains on 40.
TEST_F(ShapeFiles, ABatchLargerThanTheTrainingSetIsRefusedBeforeAnyStep) {
  const json cfg = {{"batch", 41}, {"steps", 1}, {"recipes", {"fp32"}},
                    {"data", {{"kind", "npy"}, {"classes", 4}, {"features_path", floats("x.npy", 50, 5)},
                              {"labels_path", labels("y.npy", 50, 4)}}}};
  EXPECT_EQ(error_of([&] { run_training(train_config_from_json(cfg)); }),
            "batch 41 is larger than the training set (40 rows)");
  json fits = cfg;
  fits["batch"] = 40;
  EXPECT_EQ(run_training(train_config_from_json(fits)).runs.at(0).steps_completed, 1);
}

TEST_F(ShapeFiles, ABadDataConfigurationFailsAsBuildingTheDataWould) {
  std::vector<DataConfig> bad(7);
  bad[0].train_size = 0;
  bad[1].classes = 1;
  bad[2].features = 0;
  bad[3].kind = DataKind::kNpy;
  bad[4].kind = DataKind::kNpy;
  bad[4].features_path = floats("x.npy", 10, 2);
  bad[4].labels_path = labels("y9.npy", 9, 2);
  bad[5] = bad[4];
  bad[5].labels_path = labels("y.npy", 10, 2);
  bad[5].heldout_fraction = 1.0;
  bad[6] = bad[5];
  bad[6].heldout_fraction = 0.2;
  bad[6].features_path = (dir_ / "missing.npy").string();
  for (const DataConfig& d : bad) {
    const std::string e = error_of([&] { (void)make_dataset(d, 1); });
    EXPECT_NE(e, "(no error)");
    EXPECT_EQ(error_of([&] { (void)data_shape(d); }), e);
  }
  // A kind is an enum: an unknown name is refused where the config is read, with the allowed ones.
  EXPECT_EQ(error_of([&] { (void)data_config_from_json({{"kind", "bogus"}}); }),
            "unknown data.kind 'bogus'; allowed: gaussian-mixture, teacher-student, npy");
  EXPECT_EQ(error_of([&] { (void)seq_data_config_from_json({{"kind", "npy"}}); }),
            "unknown transformer data.kind 'npy'; allowed: copy, reverse, sort, modadd, text");
  std::vector<SeqDataConfig> seq(5);
  seq[0].symbols = 1;
  seq[1].max_length = 9;  // copy needs 2 x 9 positions
  seq[2].kind = SeqTask::kText;
  seq[3].kind = SeqTask::kText;
  seq[3].text_path = text("short.txt", "abcdefgh");
  seq[4].kind = SeqTask::kText;
  seq[4].text_path = text("one.txt", std::string(400, 'x'));
  for (const SeqDataConfig& d : seq) {
    const std::string e = error_of([&] { (void)make_seq_dataset(d, 16, 1); });
    EXPECT_NE(e, "(no error)");
    EXPECT_EQ(error_of([&] { (void)seq_data_shape(d, 16); }), e);
  }
}

}  // namespace
}  // namespace precsim

// Training data generated deterministically from a seed (Gaussian-mixture classification,
// teacher-student regression) or read from .npy files, with a held-out split and a fixed batch
// order. Values are rounded to FP32 once at creation, so the FP64 reference and every FP32-opmath
// variant see bit-identical inputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace precsim {

enum class Task : uint8_t { kClassification, kRegression };

// Where an MLP's data come from; "gaussian-mixture" | "teacher-student" | "npy" in a config.
enum class DataKind : uint8_t { kGaussianMixture, kTeacherStudent, kNpy };
std::string_view to_string(DataKind k);

struct DataConfig {
  DataKind kind = DataKind::kGaussianMixture;
  int features = 32;
  int classes = 10;         // gaussian-mixture classes
  int outputs = 1;          // teacher-student outputs
  int train_size = 4096;
  int heldout_size = 1024;
  double separation = 2.0;  // gaussian-mixture: std-dev of the class means
  double noise = 1.0;       // gaussian-mixture: std-dev of each point around its mean
  int teacher_hidden = 32;  // teacher-student: width of the teacher's tanh hidden layer
  double target_scale = 1.0;  // teacher-student: scale of the teacher's outputs
  double label_noise = 0.0;   // teacher-student: std-dev of noise added to targets
  std::string features_path, labels_path;  // npy: features (N,F) float, labels (N) int or (N[,O]) float
  double heldout_fraction = 0.2;           // npy: trailing fraction held out
};

struct Dataset {
  Task task = Task::kClassification;
  int features = 0;
  int outputs = 0;  // classes, or regression outputs
  std::vector<double> x_train, x_heldout;        // (N,F), FP32 values
  std::vector<int32_t> y_train, y_heldout;       // classification
  std::vector<double> t_train, t_heldout;        // regression (N,O), FP32 values
  int train_count() const { return int(x_train.size() / features); }
  int heldout_count() const { return int(x_heldout.size() / features); }
};

// Throws std::invalid_argument naming the bad value (unknown kind, sizes, a missing or malformed
// file, NaN or Inf in user data, labels out of range).
Dataset make_dataset(const DataConfig& c, uint64_t seed);

// The task and sizes make_dataset(c, seed) gives (outputs: classes or regression outputs), with
// its checks of the configuration and of the files' shapes and their messages, without making a
// row (an npy data set's files are read, not converted). For any seed.
struct DataShape {
  Task task = Task::kClassification;
  int features = 0, outputs = 0, train_rows = 0, heldout_rows = 0;
};
DataShape data_shape(const DataConfig& c);

// Indices of the training rows of batch `step`: epochs are keyed shuffles of the training set.
void batch_indices(std::vector<int>& out, int train_count, int batch, uint64_t seed, uint64_t step);


}  // namespace precsim

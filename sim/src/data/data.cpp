#include "precsim/sim/data/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/name_table.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/core/random.h"
#include "precsim/sim/core/strict_json.h"
#include "precsim/sim/data/data_json.h"

namespace precsim {
namespace {

// Keyed random streams of the generators, kept apart so that changing one size changes no other
// stream.
enum Stream : uint64_t { kMeans = 101, kPoints, kLabels, kTeacherW1, kTeacherW2, kTargetNoise, kShuffle };

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

void gaussian_mixture(Dataset& d, const DataConfig& c, uint64_t seed) {
  d.task = Task::kClassification;
  d.outputs = c.classes;
  std::vector<double> means(size_t(c.classes) * c.features);
  for (size_t i = 0; i < means.size(); ++i) means[i] = c.separation * standard_normal(seed, kMeans, i);
  auto gen = [&](std::vector<double>& x, std::vector<int32_t>& y, int n, uint64_t offset) {
    x.resize(size_t(n) * c.features);
    y.resize(n);
    for (int i = 0; i < n; ++i) {
      const uint64_t row = offset + i;
      y[i] = static_cast<int32_t>(std::min<double>(c.classes - 1, std::floor(uniform01(seed, kLabels, row) * c.classes)));
      for (int f = 0; f < c.features; ++f)
        x[size_t(i) * c.features + f] =
            f32(means[size_t(y[i]) * c.features + f] + c.noise * standard_normal(seed, kPoints, row * c.features + f));
    }
  };
  gen(d.x_train, d.y_train, c.train_size, 0);
  gen(d.x_heldout, d.y_heldout, c.heldout_size, uint64_t(c.train_size));
}

void teacher_student(Dataset& d, const DataConfig& c, uint64_t seed) {
  d.task = Task::kRegression;
  d.outputs = c.outputs;
  const int h = c.teacher_hidden;
  std::vector<double> w1(size_t(h) * c.features), w2(size_t(c.outputs) * h);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = standard_normal(seed, kTeacherW1, i) / std::sqrt(double(c.features));
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = standard_normal(seed, kTeacherW2, i) / std::sqrt(double(h));
  auto gen = [&](std::vector<double>& x, std::vector<double>& t, int n, uint64_t offset) {
    x.resize(size_t(n) * c.features);
    t.resize(size_t(n) * c.outputs);
    std::vector<double> hid(h);
    for (int i = 0; i < n; ++i) {
      const uint64_t row = offset + i;
      double* xr = &x[size_t(i) * c.features];
      for (int f = 0; f < c.features; ++f) xr[f] = f32(standard_normal(seed, kPoints, row * c.features + f));
      for (int j = 0; j < h; ++j) {
        double s = 0;
        for (int f = 0; f < c.features; ++f) s += w1[size_t(j) * c.features + f] * xr[f];
        hid[j] = std::tanh(s);
      }
      for (int o = 0; o < c.outputs; ++o) {
        double s = 0;
        for (int j = 0; j < h; ++j) s += w2[size_t(o) * h + j] * hid[j];
        t[size_t(i) * c.outputs + o] =
            f32(c.target_scale * s + c.label_noise * standard_normal(seed, kTargetNoise, row * c.outputs + o));
      }
    }
  };
  gen(d.x_train, d.t_train, c.train_size, 0);
  gen(d.x_heldout, d.t_heldout, c.heldout_size, uint64_t(c.train_size));
}

// A NaN or Inf in the data makes the FP64 reference and every recipe non-finite from the first
// step, which then reads as the recipes' fault: refused, naming the first one by row and column.
void check_finite(const NpyArray& a, const std::vector<double>& v, const std::string& path) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) && bad++ == 0) first = i;
  if (bad == 0) return;
  const size_t cols = a.shape.size() >= 2 ? a.count() / a.shape[0] : 1;
  throw std::invalid_argument(fmt::format("'{}': {} of its {} values {} NaN or Inf, the first ({}) at row {}, column {}; "
                                          "data must be finite (drop or impute those rows first)",
                                          path, bad, v.size(), bad == 1 ? "is" : "are", std::isnan(v[first]) ? "NaN" : "Inf", first / cols,
                                          first % cols));
}

std::vector<double> npy_values(const NpyArray& a, const std::string& path) {
  const size_t n = a.count();
  std::vector<double> v(n);
  if (a.descr == "<f4") for (size_t i = 0; i < n; ++i) v[i] = a.as<float>()[i];
  else if (a.descr == "<f8") for (size_t i = 0; i < n; ++i) v[i] = f32(a.as<double>()[i]);
  else if (a.descr == "<i4") for (size_t i = 0; i < n; ++i) v[i] = a.as<int32_t>()[i];
  else if (a.descr == "<i8") for (size_t i = 0; i < n; ++i) v[i] = double(a.as<int64_t>()[i]);
  else throw std::invalid_argument(fmt::format("'{}': dtype {} is not supported; expected <f4, <f8, <i4 or <i8", path, a.descr));
  check_finite(a, v, path);
  return v;
}

// The files of an npy data set, as read.
struct NpyFiles {
  NpyArray x, y;
};

NpyFiles read_npy_files(const DataConfig& c) {
  if (c.features_path.empty() || c.labels_path.empty())
    throw std::invalid_argument("data.kind 'npy' needs data.features_path and data.labels_path");
  return {read_npy(c.features_path), read_npy(c.labels_path)};
}

// The shape of an npy data set, from its arrays' shapes and the labels' dtype: the checks of
// shapes and of the held-out split (the values are checked as they are converted).
DataShape npy_shape(const NpyArray& fx, const NpyArray& fy, const DataConfig& c) {
  if (fx.shape.size() != 2)
    throw std::invalid_argument(fmt::format("'{}': features must be 2-D (N, F), got {} dimensions", c.features_path, fx.shape.size()));
  const size_t n = fx.shape[0];
  if (fy.shape.empty() || fy.shape[0] != n || fy.shape.size() > 2)
    throw std::invalid_argument(fmt::format("'{}': labels must have shape ({},) or ({}, O) to match the {} feature rows",
                                            c.labels_path, n, n, n));
  if (!(c.heldout_fraction >= 0 && c.heldout_fraction < 1))
    throw std::invalid_argument(fmt::format("data.heldout_fraction {} is out of range; allowed: [0, 1)", c.heldout_fraction));
  const size_t held = size_t(std::floor(double(n) * c.heldout_fraction));
  const size_t train = n - held;
  if (train < 1) throw std::invalid_argument(fmt::format("'{}': no training rows after the held-out split", c.features_path));
  const bool integer_labels = fy.descr == "<i4" || fy.descr == "<i8";
  if (integer_labels && fy.shape.size() != 1)
    throw std::invalid_argument(fmt::format("'{}': integer class labels must be 1-D", c.labels_path));
  DataShape sh;
  sh.task = integer_labels ? Task::kClassification : Task::kRegression;
  sh.features = int(fx.shape[1]);
  sh.outputs = integer_labels ? c.classes : fy.shape.size() == 2 ? int(fy.shape[1]) : 1;
  sh.train_rows = int(train);
  sh.heldout_rows = int(held);
  return sh;
}

void from_npy(Dataset& d, const DataConfig& c) {
  NpyFiles files = read_npy_files(c);
  NpyArray& fx = files.x;
  NpyArray& fy = files.y;
  to_c_order(fx);
  to_c_order(fy);
  const DataShape sh = npy_shape(fx, fy, c);
  const size_t n = fx.shape[0], train = size_t(sh.train_rows), f = size_t(sh.features);
  d.features = sh.features;
  const std::vector<double> x = npy_values(fx, c.features_path), y = npy_values(fy, c.labels_path);
  d.x_train.assign(x.begin(), x.begin() + train * f);
  d.x_heldout.assign(x.begin() + train * f, x.end());
  d.task = sh.task;
  d.outputs = sh.outputs;
  if (sh.task == Task::kClassification) {
    for (size_t i = 0; i < n; ++i)
      if (y[i] < 0 || y[i] >= c.classes)
        throw std::invalid_argument(fmt::format("'{}': label {} at row {} is outside [0, {}) (data.classes)", c.labels_path, y[i], i, c.classes));
    d.y_train.assign(y.begin(), y.begin() + train);
    d.y_heldout.assign(y.begin() + train, y.end());
  } else {
    d.t_train.assign(y.begin(), y.begin() + train * d.outputs);
    d.t_heldout.assign(y.begin() + train * d.outputs, y.end());
  }
}

// The shape of a generated data set, with the checks of its configuration.
DataShape generated_shape(const DataConfig& c) {
  if (c.features < 1 || c.train_size < 1 || c.heldout_size < 1)
    throw std::invalid_argument(fmt::format("data: features ({}), train_size ({}) and heldout_size ({}) must be >= 1",
                                            c.features, c.train_size, c.heldout_size));
  DataShape sh;
  sh.features = c.features;
  sh.train_rows = c.train_size;
  sh.heldout_rows = c.heldout_size;
  if (c.kind == DataKind::kGaussianMixture) {
    if (c.classes < 2) throw std::invalid_argument(fmt::format("data.classes {} must be >= 2", c.classes));
    sh.task = Task::kClassification;
    sh.outputs = c.classes;
  } else {
    if (c.outputs < 1 || c.teacher_hidden < 1) throw std::invalid_argument("data.outputs and data.teacher_hidden must be >= 1");
    sh.task = Task::kRegression;
    sh.outputs = c.outputs;
  }
  return sh;
}

}  // namespace

DataShape data_shape(const DataConfig& c) {
  if (c.kind != DataKind::kNpy) return generated_shape(c);
  const NpyFiles files = read_npy_files(c);
  return npy_shape(files.x, files.y, c);
}

Dataset make_dataset(const DataConfig& c, uint64_t seed) {
  Dataset d;
  if (c.kind == DataKind::kNpy) {
    from_npy(d, c);
    return d;
  }
  const DataShape sh = generated_shape(c);
  d.features = sh.features;
  if (sh.task == Task::kClassification) gaussian_mixture(d, c, seed);
  else teacher_student(d, c, seed);
  return d;
}

void batch_indices(std::vector<int>& out, int train_count, int batch, uint64_t seed, uint64_t step) {
  out.resize(batch);
  std::vector<int> perm;
  int64_t cached_epoch = -1;
  for (int i = 0; i < batch; ++i) {
    const uint64_t pos = step * uint64_t(batch) + i;
    const int64_t epoch = int64_t(pos / train_count);
    if (epoch != cached_epoch) {
      // A keyed shuffle of the epoch: sort rows by a keyed uniform (ties broken by row).
      std::vector<double> key(train_count);
      for (int r = 0; r < train_count; ++r) key[r] = uniform01(seed, kShuffle + uint64_t(epoch) * 7919, r);
      perm.resize(train_count);
      std::iota(perm.begin(), perm.end(), 0);
      std::sort(perm.begin(), perm.end(), [&](int a, int b) { return key[a] != key[b] ? key[a] < key[b] : a < b; });
      cached_epoch = epoch;
    }
    out[i] = perm[pos % train_count];
  }
}

constexpr auto kDataKinds = name_table<DataKind>(
    {{DataKind::kGaussianMixture, "gaussian-mixture"}, {DataKind::kTeacherStudent, "teacher-student"}, {DataKind::kNpy, "npy"}});

std::string_view to_string(DataKind k) { return kDataKinds.name(k); }
void to_json(nlohmann::json& j, DataKind k) { j = to_string(k); }
void from_json(const nlohmann::json& j, DataKind& k) { k = kDataKinds.parse(j.get<std::string>(), "data.kind"); }

// One list of the keys serves both directions; the names are the config keys.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DataConfig, kind, features, classes, outputs, train_size, heldout_size, separation,
                                   noise, teacher_hidden, target_scale, label_noise, features_path, labels_path,
                                   heldout_fraction)

nlohmann::json data_config_to_json(const DataConfig& c) { return c; }

DataConfig data_config_from_json(const nlohmann::json& j) {
  DataConfig c = merge_config(data_config_to_json(DataConfig{}), j, "data").get<DataConfig>();
  // Paths to files mean the files: without a kind they are an npy data set, and with another kind
  // they would be ignored while the run trains on generated data.
  const bool paths = !c.features_path.empty() || !c.labels_path.empty();
  if (paths && j.is_object() && !j.contains("kind")) c.kind = DataKind::kNpy;
  if (paths && c.kind != DataKind::kNpy)
    throw std::invalid_argument("data.features_path and data.labels_path are read only with data.kind 'npy'; data.kind is '" +
                                std::string(to_string(c.kind)) + "' (set \"kind\": \"npy\", or remove the paths)");
  return c;
}

}  // namespace precsim

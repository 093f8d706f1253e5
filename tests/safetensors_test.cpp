// The .safetensors reader: every dtype decoded from known bit patterns, metadata, and files whose
// header lies (offsets past the end, sizes that disagree with the shape, overlaps, bad JSON,
// truncation), each rejected with a message naming the tensor and the numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/reports/safetensors.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string name, dtype;
  std::vector<size_t> shape;
  std::string bytes;
};

template <typename T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  size_t i = 0;
  for (T x : v) std::memcpy(s.data() + sizeof(T) * i++, &x, sizeof(T));
  return s;
}

std::string header_bytes(const nlohmann::json& h) {
  const std::string text = h.dump();
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + text;
}

// A well-formed file; `edit` may change the header before it is written.
std::string build(const std::vector<Entry>& es, const std::function<void(nlohmann::json&)>& edit = {}) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& e : es) {
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.bytes.size()}}};
    data += e.bytes;
  }
  h["__metadata__"] = {{"format", "pt"}};
  if (edit) edit(h);
  return header_bytes(h) + data;
}

class Safetensors : public ::testing::Test {
 protected:
  fs::path file(const std::string& content) {
    const fs::path p = fs::temp_directory_path() /
                       ("precsim_st_" + std::to_string(::getpid()) + "_" + std::to_string(n_++) + ".safetensors");
    std::ofstream(p, std::ios::binary) << content;
    files_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (const auto& p : files_) fs::remove(p);
  }
  void expect_invalid(const std::string& content, const std::string& needle) {
    const fs::path p = file(content);
    try {
      SafetensorsFile f(p);
      ADD_FAILURE() << "accepted a bad file; expected an error containing '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  int n_ = 0;
  std::vector<fs::path> files_;
};

TEST_F(Safetensors, DecodesEveryDtypeFromKnownBits) {
  const std::vector<Entry> es = {
      {"f32", "F32", {2}, raw<float>({1.5f, -0.0f})},
      {"f64", "F64", {1}, raw<double>({0.1})},
      {"f16", "F16", {3}, raw<uint16_t>({0x3c00, 0xc000, 0x0001})},      // 1, -2, 2^-24
      {"bf16", "BF16", {2}, raw<uint16_t>({0x3f80, 0x4049})},            // 1, 3.140625
      {"e4m3", "F8_E4M3", {3}, raw<uint8_t>({0x7e, 0x01, 0xff})},        // 448, 2^-9, NaN
      {"e5m2", "F8_E5M2", {2}, raw<uint8_t>({0x7b, 0x7c})},              // 57344, Inf
      {"i8", "I8", {2}, raw<int8_t>({-5, 127})},
      {"u8", "U8", {1}, raw<uint8_t>({255})},
      {"i16", "I16", {1}, raw<int16_t>({-300})},
      {"u16", "U16", {1}, raw<uint16_t>({65535})},
      {"i32", "I32", {1}, raw<int32_t>({-16777217})},                    // rounds to -2^24 (ties even)
      {"u32", "U32", {1}, raw<uint32_t>({4000000000u})},
      {"i64", "I64", {1}, raw<int64_t>({-(int64_t{1} << 40)})},
      {"u64", "U64", {1}, raw<uint64_t>({uint64_t{1} << 63})},
      {"b", "BOOL", {2}, raw<uint8_t>({1, 0})},
      {"scalar", "F32", {}, raw<float>({7.0f})},
      {"matrix", "F32", {2, 3, 1}, raw<float>({1, 2, 3, 4, 5, 6})},
  };
  const SafetensorsFile f(file(build(es)));
  EXPECT_EQ(f.tensors().size(), es.size());
  EXPECT_EQ(f.metadata().at("format"), "pt");
  auto v = [&](const char* n) { return f.read_f32(*f.find(n)); };
  EXPECT_EQ(v("f32"), (std::vector<float>{1.5f, -0.0f}));
  EXPECT_TRUE(std::signbit(v("f32")[1]));
  EXPECT_EQ(v("f64"), (std::vector<float>{0.1f}));
  EXPECT_EQ(v("f16"), (std::vector<float>{1.0f, -2.0f, 0x1p-24f}));
  EXPECT_EQ(v("bf16"), (std::vector<float>{1.0f, 3.140625f}));
  const auto e4 = v("e4m3");
  EXPECT_EQ(e4[0], 448.0f);
  EXPECT_EQ(e4[1], 0x1p-9f);
  EXPECT_TRUE(std::isnan(e4[2]));
  EXPECT_EQ(v("e5m2"), (std::vector<float>{57344.0f, INFINITY}));
  EXPECT_EQ(v("i8"), (std::vector<float>{-5, 127}));
  EXPECT_EQ(v("u8"), (std::vector<float>{255}));
  EXPECT_EQ(v("i16"), (std::vector<float>{-300}));
  EXPECT_EQ(v("u16"), (std::vector<float>{65535}));
  EXPECT_EQ(v("i32"), (std::vector<float>{-16777216.0f}));
  EXPECT_EQ(v("u32"), (std::vector<float>{4e9f}));
  EXPECT_EQ(v("i64"), (std::vector<float>{-0x1p40f}));
  EXPECT_EQ(v("u64"), (std::vector<float>{0x1p63f}));
  EXPECT_EQ(v("b"), (std::vector<float>{1, 0}));
  EXPECT_EQ(v("scalar"), (std::vector<float>{7}));
  EXPECT_EQ(f.find("matrix")->shape, (std::vector<size_t>{2, 3, 1}));
  EXPECT_EQ(v("matrix")[5], 6.0f);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_NE(f.names().find("bf16"), std::string::npos);
}

TEST_F(Safetensors, EmptyTensorsAndUnknownDtypes) {
  const SafetensorsFile f(file(build({{"empty", "F32", {0, 4}, ""}, {"c", "C64", {1}, std::string(8, '\0')}})));
  EXPECT_EQ(f.find("empty")->count(), 0u);
  EXPECT_TRUE(f.read_f32(*f.find("empty")).empty());
  try {
    f.read_f32(*f.find("c"));
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("C64"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("BF16"), std::string::npos);
  }
}

TEST_F(Safetensors, RejectsLyingAndTruncatedFiles) {
  const std::vector<Entry> two = {{"a", "F32", {4}, raw<float>({1, 2, 3, 4})}, {"b", "F16", {2}, raw<uint16_t>({0, 0})}};
  const std::string good = build(two);
  // Truncated data: the last tensor runs past the end.
  expect_invalid(good.substr(0, good.size() - 1), "run past the data section");
  // Truncated inside the header, and shorter than the length field.
  expect_invalid(good.substr(0, 20), "runs past the end of the file");
  expect_invalid(good.substr(0, 5), "shorter than the 8-byte header length");
  // The header lies about offsets, sizes and overlaps.
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"]["data_offsets"] = {0, 1000}; }), "tensor 'a'");
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"]["data_offsets"] = {0, 12}; }), "needs 16");
  expect_invalid(build(two, [](nlohmann::json& h) { h["b"]["data_offsets"] = {12, 16}; }), "overlap");
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"]["data_offsets"] = {16, 0}; }), "ends before it begins");
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"]["shape"] = {-4}; }), "non-integer");
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"].erase("dtype"); }), "needs dtype, shape and data_offsets");
  expect_invalid(build(two, [](nlohmann::json& h) { h["a"]["shape"] = {uint64_t{1} << 62, 16}; }), "too large");
  // Not JSON, not an object, a huge length field.
  std::string bad_json = header_bytes(nlohmann::json::object());
  bad_json[9] = '[';
  expect_invalid(bad_json, "not valid JSON");
  expect_invalid(header_bytes(nlohmann::json::array()), "not a JSON object");
  std::string huge(8, '\xff');
  expect_invalid(huge + "{}", "exceeds the 100 MB limit");
  try {
    SafetensorsFile f("/nonexistent/x.safetensors");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace precsim

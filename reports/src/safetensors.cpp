#include "precsim/reports/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/formats/quantize.h"

namespace precsim {
namespace {

// The safetensors reference implementation caps the header at 100 MB.
constexpr uint64_t kMaxHeader = 100'000'000;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail(const std::filesystem::path& p, const std::string& why) {
  throw std::invalid_argument("'" + p.string() + "' is not a valid .safetensors file: " + why);
}

template <typename T>
void convert(const unsigned char* src, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

}  // namespace

size_t SafetensorsTensor::count() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

size_t safetensors_dtype_size(std::string_view d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "F8_E4M3" || d == "F8_E5M2" || d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

const std::vector<std::string>& SafetensorsFile::supported_dtypes() {
  static const std::vector<std::string> v = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64",
                                             "I32", "I16",  "I8",  "U64",  "U32",     "U16",     "U8", "BOOL"};
  return v;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw std::invalid_argument("cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw std::invalid_argument("'" + path.string() + "' is not a regular file");
  file_size_ = static_cast<uint64_t>(st.st_size);
  unsigned char len_bytes[8];
  if (file_size_ < 8 || ::pread(f.fd, len_bytes, 8, 0) != 8)
    fail(path, "shorter than the 8-byte header length (" + std::to_string(file_size_) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > file_size_ - 8)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file_size_) + " bytes): truncated?");
  std::string header(n, '\0');
  if (n && ::pread(f.fd, header.data(), n, 8) != static_cast<ssize_t>(n)) fail(path, "cannot read the header");
  data_start_ = 8 + n;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_size = file_size_ - data_start_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m)
        metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    auto bad = [&](const std::string& why) { fail(path, "tensor '" + name + "': " + why); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad("needs dtype, shape and data_offsets");
    SafetensorsTensor t;
    t.name = name;
    if (!v["dtype"].is_string()) bad("dtype is not a string");
    t.dtype = v["dtype"].get<std::string>();
    const size_t item = safetensors_dtype_size(t.dtype);
    if (!v["shape"].is_array()) bad("shape is not an array");
    unsigned __int128 count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad("shape " + v["shape"].dump() + " holds a non-integer");
      t.shape.push_back(d.get<size_t>());
      count *= d.get<size_t>();
      if (count > std::numeric_limits<uint64_t>::max()) bad("shape " + v["shape"].dump() + " is too large");
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets " + off.dump() + " is not [begin, end]");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end) bad("data_offsets " + off.dump() + " ends before it begins");
    if (t.end > data_size)
      bad("data_offsets " + off.dump() + " run past the data section (" + std::to_string(data_size) +
          " bytes): the header lies or the file is truncated");
    if (item != 0 && static_cast<unsigned __int128>(t.end - t.begin) != count * item)
      bad("data_offsets " + off.dump() + " span " + std::to_string(t.end - t.begin) + " bytes but " +
          t.dtype + " shape " + v["shape"].dump() + " needs " + std::to_string(static_cast<uint64_t>(count * item)));
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  // Empty tensors occupy no bytes and overlap nothing.
  const SafetensorsTensor* prev = nullptr;
  for (const auto& t : tensors_) {
    if (t.begin == t.end) continue;
    if (prev && t.begin < prev->end) fail(path, "tensors '" + prev->name + "' and '" + t.name + "' overlap");
    prev = &t;
  }
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string SafetensorsFile::names() const {
  std::string s;
  for (const auto& t : tensors_) s += (s.empty() ? "" : ", ") + t.name;
  return s.empty() ? "(none)" : s;
}

std::vector<float> SafetensorsFile::read_f32(const SafetensorsTensor& t) const {
  const size_t item = safetensors_dtype_size(t.dtype);
  if (item == 0)
    throw std::invalid_argument("tensor '" + t.name + "' in '" + path_.string() + "' has dtype " + t.dtype +
                                ", which is not supported; supported: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, "
                                "I64, I32, I16, I8, U64, U32, U16, U8, BOOL");
  const size_t n = t.count();
  std::vector<float> out(n);
  if (n == 0) return out;
  Fd f{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw std::invalid_argument("cannot open '" + path_.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != file_size_)
    throw std::invalid_argument("'" + path_.string() + "' changed size while being read");
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t abs_begin = data_start_ + t.begin;
  const uint64_t map_off = abs_begin / page * page;
  const size_t map_len = static_cast<size_t>(data_start_ + t.end - map_off);
  void* m = ::mmap(nullptr, map_len, PROT_READ, MAP_PRIVATE, f.fd, static_cast<off_t>(map_off));
  if (m == MAP_FAILED)
    throw std::invalid_argument("cannot map tensor '" + t.name + "' of '" + path_.string() + "': " + std::strerror(errno));
  ::madvise(m, map_len, MADV_SEQUENTIAL);
  const auto* src = static_cast<const unsigned char*>(m) + (abs_begin - map_off);
  const std::string& d = t.dtype;
  std::span<float> o(out);
  if (d == "F32") std::memcpy(out.data(), src, n * 4);
  else if (d == "F64") convert<double>(src, n, out.data());
  else if (d == "F16") decode_array(format_by_name("fp16"), src, o);
  else if (d == "BF16") decode_array(format_by_name("bf16"), src, o);
  else if (d == "F8_E4M3") decode_array(format_by_name("float8_e4m3fn"), src, o);
  else if (d == "F8_E5M2") decode_array(format_by_name("float8_e5m2"), src, o);
  else if (d == "I64") convert<int64_t>(src, n, out.data());
  else if (d == "I32") convert<int32_t>(src, n, out.data());
  else if (d == "I16") convert<int16_t>(src, n, out.data());
  else if (d == "I8") convert<int8_t>(src, n, out.data());
  else if (d == "U64") convert<uint64_t>(src, n, out.data());
  else if (d == "U32") convert<uint32_t>(src, n, out.data());
  else if (d == "U16") convert<uint16_t>(src, n, out.data());
  else convert<uint8_t>(src, n, out.data());  // U8, BOOL
  // Release the pages now, so the next tensor does not add to the resident set.
  ::madvise(m, map_len, MADV_DONTNEED);
  ::munmap(m, map_len);
  return out;
}

}  // namespace precsim

#include "precsim/reports/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <regex>
#include <stdexcept>

#include "precsim/reports/report.h"
#include "precsim/reports/result_file.h"

namespace precsim {
namespace {

[[noreturn]] void bad(const std::filesystem::path& p, const std::string& what) {
  throw std::invalid_argument("'" + p.string() + "': " + what);
}

}  // namespace

size_t NpyArray::count() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

size_t NpyArray::item_size() const { return static_cast<size_t>(std::stoul(descr.substr(2))); }

void to_c_order(NpyArray& a) {
  if (!a.fortran_order) return;
  a.fortran_order = false;
  const size_t dims = a.shape.size(), n = a.count(), w = a.item_size();
  if (dims < 2 || n == 0) return;
  // Walk the row-major positions with a multi-index; the column-major offset of index (i_0..i_d-1)
  // is sum i_k * stride_k with stride_0 = 1, stride_k = stride_k-1 * shape_k-1.
  std::vector<size_t> stride(dims, 1), idx(dims, 0);
  for (size_t k = 1; k < dims; ++k) stride[k] = stride[k - 1] * a.shape[k - 1];
  std::vector<unsigned char> out(a.data.size());
  size_t src = 0;
  for (size_t pos = 0; pos < n; ++pos) {
    std::memcpy(out.data() + pos * w, a.data.data() + src * w, w);
    for (size_t k = dims; k-- > 0;) {
      if (++idx[k] < a.shape[k]) {
        src += stride[k];
        break;
      }
      src -= (a.shape[k] - 1) * stride[k];
      idx[k] = 0;
    }
  }
  a.data = std::move(out);
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot open (missing or unreadable)");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    bad(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  size_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) bad(path, "truncated header");
    header_len = b[0] | (size_t{b[1]} << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) bad(path, "truncated header");
    header_len = b[0] | (size_t{b[1]} << 8) | (size_t{b[2]} << 16) | (size_t{b[3]} << 24);
  } else {
    bad(path, "unsupported .npy version " + std::to_string(major));
  }
  if (header_len > (1u << 20)) bad(path, "header length " + std::to_string(header_len) + " is implausible");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) bad(path, "truncated header");

  static const std::regex descr_re(R"('descr'\s*:\s*'([<>|=])([a-zA-Z])(\d+)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([0-9,\s]*)\))");
  std::smatch m;
  NpyArray a;
  if (!std::regex_search(header, m, descr_re))
    bad(path, "header has no simple 'descr' (structured and object dtypes are not supported)");
  const std::string endian = m[1], kind = m[2], size = m[3];
  if (endian == ">") bad(path, "big-endian data is not supported");
  if (kind == "O") bad(path, "object arrays are not supported");
  if (size.size() > 2 || std::stoul(size) == 0 || std::stoul(size) > 16) bad(path, "unsupported item size " + size);
  a.descr = (endian == "=" ? std::string("<") : endian) + kind + size;
  if (!std::regex_search(header, m, order_re)) bad(path, "header has no 'fortran_order'");
  a.fortran_order = m[1] == "True";
  if (!std::regex_search(header, m, shape_re)) bad(path, "header has no 'shape'");
  const std::string dims = m[1];
  static const std::regex num_re(R"(\d+)");
  // The element count and the byte count must not wrap, and the file must hold the data, before
  // anything is allocated: a header can promise any size.
  size_t count = 1;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num_re); it != std::sregex_iterator(); ++it) {
    const std::string d = it->str();
    size_t v = 0;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
    if (ec != std::errc() || end != d.data() + d.size() || __builtin_mul_overflow(count, v, &count))
      bad(path, "shape (" + dims + ") has more elements than memory can address");
    a.shape.push_back(v);
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, a.item_size(), &bytes))
    bad(path, "shape (" + dims + ") of " + a.descr + " has more bytes than memory can address");
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const auto available = static_cast<uint64_t>(in.tellg() - data_start);
  in.seekg(data_start);
  if (bytes > available)
    bad(path, "truncated data: the header promises " + std::to_string(bytes) + " bytes, the file holds " +
                  std::to_string(available));
  a.data.resize(bytes);
  if (bytes && !in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(bytes)))
    bad(path, "truncated data: the header promises " + std::to_string(bytes) + " bytes");
  return a;
}

std::string npy_header(const std::string& descr, const std::vector<size_t>& shape) {
  // NumPy spells a 1-d shape "(N,)" and others "(A, B)".
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\x00';
  const size_t unpadded = head.size() + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  return head + dict;
}

void write_npy(const std::filesystem::path& path, const std::string& descr,
               const std::vector<size_t>& shape, const void* data, size_t bytes) {
  const std::string header = npy_header(descr, shape);
  const std::string_view parts[] = {header, {static_cast<const char*>(data), bytes}};
  write_result_file(path, parts);
}

}  // namespace precsim

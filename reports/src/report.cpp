#include "precsim/reports/report.h"

#include <fcntl.h>
#include <gnu/libc-version.h>
#include <omp.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "precsim/reports/result_file.h"
#include "precsim_commit.h"

namespace precsim {

std::string_view precsim_version() { return PRECSIM_VERSION; }
std::string_view precsim_git_commit() { return PRECSIM_GIT_COMMIT; }

nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double read_number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw std::invalid_argument("expected a number or \"nan\"/\"inf\"/\"-inf\", got " + j.dump());
}

std::string hex_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

double parse_real(std::string_view text) {
  const std::string s(text);
  if (s == "nan" || s == "NaN") return std::nan("");
  if (s == "inf" || s == "+inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0]))) {
    throw std::invalid_argument("'" + s + "' is not a number (decimal or C99 hex-float such as 0x1.8p-24)");
  }
  return v;  // ERANGE overflow gives +-HUGE_VAL = +-Inf, underflow the correctly rounded value
}

std::string results_digest(const nlohmann::json& results) {
  const std::string canonical = results.dump();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(canonical.data(), canonical.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

Report::Report(std::string kind) : kind_(std::move(kind)), start_(std::chrono::steady_clock::now()) {}

void Report::set_command_line(int argc, const char* const* argv) {
  argv_.assign(argv, argv + argc);
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

nlohmann::json Report::document(bool deterministic) const {
  nlohmann::json d;
  d["schema"] = kReportSchema;
  d["kind"] = kind_;
  d["status"] = status_;
  d["tool"] = {{"name", "precsim"},
               {"version", precsim_version()},
               {"commit", precsim_git_commit()},
               {"build_type", PRECSIM_BUILD_TYPE},
               {"compiler", compiler()}};
  d["config"] = config_;
  d["seeds"] = seeds_;
  d["results"] = results_;
  d["digest"] = results_digest(results_);
  if (!deterministic) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    d["environment"] = {{"date", utc_now()},
                        {"wall_time_s", wall},
                        {"host", host},
                        {"cpu", cpu_model()},
                        {"threads", omp_get_max_threads()},
                        {"libc", std::string("glibc ") + gnu_get_libc_version()},
                        {"command_line", argv_}};
  }
  return d;
}

namespace {

[[noreturn]] void fail_io(const std::string& what, const std::filesystem::path& p) {
  throw std::runtime_error(what + " '" + p.string() + "': " + std::strerror(errno));
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  write_file_atomic(path, std::span<const std::string_view>(&content, 1));
}

namespace {

// The folder `path` is written in, and the mkstemp template of its temporary file there.
std::filesystem::path folder_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : ".";
}
std::string temp_template(const std::filesystem::path& path) {
  return (folder_of(path) / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
}

// Fault injection for the drills (tests/fault_report_test.py): with PRECSIM_FAULT_ENOSPC=TEXT, a
// write of a file whose path contains TEXT fails with ENOSPC after half of its first piece, as on a
// file system that fills up while the file is written (no test may assume it can mount a tmpfs).
bool injected_enospc(const std::filesystem::path& path) {
  const char* text = std::getenv("PRECSIM_FAULT_ENOSPC");
  return text != nullptr && *text != '\0' && path.string().find(text) != std::string::npos;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::span<const std::string_view> parts) {
  const std::filesystem::path dir = folder_of(path);
  std::string tmpl = temp_template(path);
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) fail_io("cannot create a temporary file beside", path);
  auto cleanup = [&] {
    ::close(fd);
    ::unlink(tmpl.c_str());
  };
  const bool fault = injected_enospc(path);
  for (const std::string_view content : parts) {
    size_t done = 0;
    const size_t room = fault ? content.size() / 2 : content.size();  // the injected fault's full disk
    while (done < content.size()) {
      const ssize_t w = done >= room ? (errno = ENOSPC, -1) : ::write(fd, content.data() + done, room - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        cleanup();
        errno = e;
        fail_io("cannot write", path);
      }
      done += static_cast<size_t>(w);
    }
  }
  // mkstemp creates 0600; give the report the usual permissions under the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::fsync(fd) != 0) {
    const int e = errno;
    cleanup();
    errno = e;
    fail_io("cannot fsync", path);
  }
  ::close(fd);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    errno = e;
    fail_io("cannot rename the temporary file onto", path);
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void check_writable(const std::filesystem::path& path) {
  const std::filesystem::path dir = folder_of(path);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    errno = ENOENT;
    fail_io("cannot write", path);
  }
  if (std::filesystem::is_directory(path, ec)) {
    errno = EISDIR;
    fail_io("cannot write", path);
  }
  // Create and remove the temporary file write_file_atomic would: access(W_OK) says yes to root
  // in a read-only folder, on a read-only mount and in /proc, where the write fails after the run.
  std::string tmpl = temp_template(path);
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) fail_io("cannot write", path);
  ::close(fd);
  ::unlink(tmpl.c_str());
}

void emit_report(const Report& r, const OutputOptions& o) {
  const std::string text = r.document(o.deterministic).dump(2) + "\n";
  // Standard output first: a report that cannot be written to --out still reaches a --json reader.
  if (o.json) {
    std::cout << text;
    std::cout.flush();
  }
  if (!o.out.empty()) write_result_file(o.out, text);
}

}  // namespace precsim

// The sweep folder's lock: flock for exclusion, the holder's pid in the file for the messages.
#include "sweep_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "cli_common.h"

namespace precsim::cli {
namespace {

namespace fs = std::filesystem;

// The pid written in the lock file, or 0 when it holds none (new, or released by its sweep).
long holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  return std::strtol(buf, nullptr, 10);
}

void write_pid(int fd) {
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size()))
    std::cerr << fmt::format("warning: cannot write the pid into the sweep lock: {}\n", std::strerror(errno));
}

}  // namespace

int lock_out_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "units", ec);
  if (ec) throw UsageError("--out-dir '" + dir.string() + "': cannot create it: " + ec.message());
  const fs::path lock = dir / ".sweep.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError("--out-dir '" + dir.string() + "': cannot write in it: " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const long pid = holder_pid(fd);
    ::close(fd);
    throw UsageError(fmt::format("--out-dir '{}': another precsim sweep{} is running in it", dir.string(),
                                 pid > 0 ? fmt::format(" (pid {})", pid) : ""));
  }
  // The lock is ours, so whoever wrote a pid here died without releasing it (SIGKILL, a crash).
  if (const long pid = holder_pid(fd); pid > 0) {
    const bool running = ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
    std::cerr << fmt::format("sweep: removed the stale lock {} of coordinator pid {}, {}; finished units are kept\n",
                             lock.string(), pid, running ? "which no longer holds it" : "which is no longer running");
  }
  write_pid(fd);
  for (const auto& e : fs::directory_iterator(dir / "units"))
    if (e.path().filename().string().rfind(".", 0) == 0 &&
        e.path().filename().string().find(".tmp.") != std::string::npos)
      fs::remove(e.path(), ec);
  return fd;
}

SweepLockRelease::~SweepLockRelease() {
  if (fd_ < 0) return;
  // A pid left behind only makes the next sweep say that it cleared a stale lock.
  [[maybe_unused]] const int rc = ::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace precsim::cli

// The lock of a sweep's output folder (D/.sweep.lock): one coordinator per folder. flock holds it,
// so the kernel frees it when its holder dies; the file also names the holder's pid, so that the
// next coordinator can say a killed one left it, and a refused one can say who holds it.
#pragma once

#include <filesystem>

namespace precsim::cli {

// Creates D/units/, takes the lock (UsageError naming the holder's pid when another sweep holds
// it), says on stderr when it clears a stale lock (a pid that no longer holds it), writes this
// process's pid and removes the temporary files of killed workers. Returns the lock's descriptor.
int lock_out_dir(const std::filesystem::path& dir);

// Clears the pid and releases the lock; a sweep that ends in any way but a kill leaves no holder.
class SweepLockRelease {
 public:
  explicit SweepLockRelease(int fd) : fd_(fd) {}
  SweepLockRelease(const SweepLockRelease&) = delete;
  SweepLockRelease& operator=(const SweepLockRelease&) = delete;
  ~SweepLockRelease();

 private:
  int fd_;
};

}  // namespace precsim::cli

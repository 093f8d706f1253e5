#include "precsim/sim/experiment/sweep_local.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>

extern char** environ;

namespace precsim {
namespace {

pid_t spawn_worker(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &blocked);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start a sweep worker '{}': {}", args[0], std::strerror(rc)));
  return pid;
}

std::string death(int status) {
  if (WIFSIGNALED(status)) return fmt::format("its worker was killed by signal {}", WTERMSIG(status));
  return fmt::format("its worker exited with code {}", WEXITSTATUS(status));
}

}  // namespace

bool started_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void run_local(const SweepPlan& plan, const std::vector<size_t>& order, const LocalExecutor& ex, const SweepHooks& hooks) {
  std::deque<size_t> queue(order.begin(), order.end());
  std::map<size_t, int> tries;
  std::map<pid_t, size_t> running;
  auto stopping = [&] { return hooks.stop && hooks.stop(); };
  while (true) {
    while (!queue.empty() && int(running.size()) < ex.jobs && !stopping()) {
      const size_t i = queue.front();
      queue.pop_front();
      ++tries[i];
      running[spawn_worker(ex.worker_argv(plan.units[i]))] = i;
      if (hooks.started) hooks.started(plan.units[i]);
    }
    if (running.empty()) return;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("waiting for sweep workers: ") + std::strerror(errno));
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    std::string error;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      error.clear();
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      error = "its configuration was refused (the worker's message is above)";
    } else if (tries[i] < ex.attempts && !stopping()) {
      queue.push_front(i);  // died: run it again before anything else
      fmt::print(stderr, "sweep: unit {} ({}): {}; running it again\n", i, plan.units[i].id, death(status));
      continue;
    } else {
      error = death(status) + fmt::format(" (attempt {} of {})", tries[i], ex.attempts);
    }
    if (hooks.finished) hooks.finished(plan.units[i], error);
  }
}

}  // namespace precsim

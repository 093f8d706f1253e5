// The local executor: units run in up to `jobs` worker processes on this machine, each an exec of
// a command that runs one unit and writes its report (`precsim sweep PLAN --out-dir D --unit ID`).
// Processes rather than threads: a worker that crashes or is killed takes only its unit with it,
// and that unit is run again; each unit's run is the same code in the same binary either way, so
// the reports are byte-identical to a one-job run.
#pragma once

#include <string>
#include <vector>

#include "precsim/sim/experiment/sweep_executor.h"

namespace precsim {

struct LocalExecutor {
  int jobs = 1;
  int attempts = 3;  // a unit whose worker died (signal, unexpected exit) runs again, up to this
  // argv of the worker for a unit; argv[0] is the executable's path. Exit 0: report written;
  // exit 2: the unit's configuration was refused (not retried); anything else: the worker died.
  std::function<std::vector<std::string>(const SweepUnit&)> worker_argv;
};

// Runs `order` (indices into plan.units). Workers start with SIGINT and SIGTERM blocked, so an
// interrupt lets the units in progress finish while hooks.stop keeps new ones from starting.
// Throws std::runtime_error when a worker cannot be started.
void run_local(const SweepPlan& plan, const std::vector<size_t>& order, const LocalExecutor& ex, const SweepHooks& hooks);

}  // namespace precsim

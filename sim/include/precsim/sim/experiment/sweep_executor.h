// What every sweep executor (local processes, MPI ranks) shares: it is handed the units to run in
// dispatch order, writes each finished unit's report to D/units/ID.json, and tells its caller.
// Executors move work and results; each unit's numbers come from that unit's configuration alone.
#pragma once

#include <functional>
#include <string>

#include "precsim/sim/experiment/sweep_plan.h"

namespace precsim {

struct SweepHooks {
  // Polled before each unit is handed out: true hands out no more; units in progress finish.
  std::function<bool()> stop;
  std::function<void(const SweepUnit&)> started;
  // A unit ended: `error` is empty when its report was written, else why it was not.
  std::function<void(const SweepUnit&, const std::string& error)> finished;
};

// True when an MPI launcher (mpirun, srun) started this process: OpenMPI's, PMI's or PMIx's
// environment is set.
bool started_by_mpi_launcher();

}  // namespace precsim

// The MPI executor (built only when CMake finds MPI, -DPRECSIM_MPI=AUTO|ON|OFF): under
// `mpirun -n N precsim sweep ...` rank 0 reads the sweep file, passes it to every rank and hands
// units out one at a time, longest first, to every rank including itself (a thread); the ranks
// send each unit's report back and rank 0 writes it. MPI only moves work and results: each unit's
// numbers come from its configuration, and the merge reads the reports in plan order.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "precsim/sim/experiment/sweep_executor.h"

namespace precsim {

class MpiSweep {
 public:
  MpiSweep(int* argc, char*** argv);  // MPI_Init_thread (funneled: only this thread calls MPI)
  ~MpiSweep();                        // MPI_Finalize
  MpiSweep(const MpiSweep&) = delete;
  MpiSweep& operator=(const MpiSweep&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank 0's `text` on every rank (rank 0 passes "" when it refused the sweep file).
  std::string share(const std::string& text) const;
  // Rank 0: runs `order` (indices into plan.units) over all ranks, writing reports to out_dir/units.
  void lead(const SweepPlan& plan, const std::vector<size_t>& order, const std::filesystem::path& out_dir,
            const SweepHooks& hooks) const;
  // Every other rank: runs the units rank 0 hands out until it says stop.
  void serve(const SweepPlan& plan) const;

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace precsim

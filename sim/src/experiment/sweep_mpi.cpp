// The MPI executor: rank 0 leads (hands out units, writes reports), every rank runs units. Built
// only when MPI is found (CMakeLists.txt); the protocol is four tags on MPI_COMM_WORLD.
#include "precsim/sim/experiment/sweep_mpi.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

#include "precsim/reports/interrupt.h"
#include "precsim/reports/report.h"
#include "precsim/reports/result_file.h"
#include "precsim/sim/experiment/sweep_unit.h"

namespace precsim {
namespace {

enum Tag : int { kReady = 1, kResult = 2, kWork = 3, kStop = 4 };

// A unit's report text, or the reason it has none.
struct Outcome {
  uint64_t unit = 0;
  bool ok = false;
  std::string text;
};

std::vector<char> encode(const Outcome& o) {
  std::vector<char> buf(sizeof o.unit + 1 + o.text.size());
  std::memcpy(buf.data(), &o.unit, sizeof o.unit);
  buf[sizeof o.unit] = o.ok ? 1 : 0;
  std::memcpy(buf.data() + sizeof o.unit + 1, o.text.data(), o.text.size());
  return buf;
}

Outcome decode(const std::vector<char>& buf) {
  Outcome o;
  std::memcpy(&o.unit, buf.data(), sizeof o.unit);
  o.ok = buf[sizeof o.unit] != 0;
  o.text.assign(buf.data() + sizeof o.unit + 1, buf.size() - sizeof o.unit - 1);
  return o;
}

Outcome run_one(const SweepPlan& plan, uint64_t i) {
  try {
    return {i, true, run_sweep_unit(plan.units[i])};
  } catch (const std::exception& e) {
    return {i, false, e.what()};
  }
}

std::vector<char> receive(const MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::vector<char> buf(size_t(n) + 1);
  MPI_Recv(buf.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  buf.resize(size_t(n));
  return buf;
}

// Rank 0's own worker: one unit at a time on a thread, so the leading thread keeps answering.
struct LocalSlot {
  std::thread thread;
  std::atomic<bool> done{false};
  bool busy = false;
  Outcome out;
  void start(const SweepPlan& plan, uint64_t i) {
    busy = true;
    done = false;
    thread = std::thread([this, &plan, i] {
      out = run_one(plan, i);
      done = true;
    });
  }
};

}  // namespace

MpiSweep::MpiSweep(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (provided < MPI_THREAD_FUNNELED) throw std::runtime_error("this MPI library cannot run a thread beside MPI calls");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSweep::~MpiSweep() { MPI_Finalize(); }

std::string MpiSweep::share(const std::string& text) const {
  uint64_t n = text.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  std::string out = rank_ == 0 ? text : std::string(n, '\0');
  MPI_Bcast(out.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

void MpiSweep::lead(const SweepPlan& plan, const std::vector<size_t>& order, const std::filesystem::path& out_dir,
                    const SweepHooks& hooks) const {
  std::deque<uint64_t> queue(order.begin(), order.end());
  auto more = [&] { return !queue.empty() && !(hooks.stop && hooks.stop()); };
  auto next = [&] {
    const uint64_t i = queue.front();
    queue.pop_front();
    if (hooks.started) hooks.started(plan.units[i]);
    return i;
  };
  auto deliver = [&](const Outcome& o) {
    std::string error = o.ok ? "" : o.text;
    if (o.ok) try {
        write_result_file(unit_report_path(out_dir, plan.units[o.unit]), o.text);
      } catch (const std::exception& e) {
        error = e.what();
      }
    if (hooks.finished) hooks.finished(plan.units[o.unit], error);
  };
  LocalSlot local;
  int active = size_ - 1;  // ranks not yet told to stop
  while (active > 0 || local.busy || more()) {
    bool idle = true;
    if (local.busy && local.done) {
      local.thread.join();
      local.busy = false;
      deliver(local.out);
      idle = false;
    }
    if (!local.busy && more()) local.start(plan, next()), idle = false;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      idle = false;
      const std::vector<char> buf = receive(st);
      if (st.MPI_TAG == kResult) deliver(decode(buf));
      if (more()) {
        const uint64_t i = next();
        MPI_Send(&i, 1, MPI_UINT64_T, st.MPI_SOURCE, kWork, MPI_COMM_WORLD);
      } else {
        MPI_Send(nullptr, 0, MPI_CHAR, st.MPI_SOURCE, kStop, MPI_COMM_WORLD);
        --active;
      }
    }
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

void MpiSweep::serve(const SweepPlan& plan) const {
  // mpirun forwards SIGTERM to every rank: the unit in progress finishes and rank 0, which got
  // the signal too, hands out no more.
  const InterruptGuard guard;
  MPI_Send(nullptr, 0, MPI_CHAR, 0, kReady, MPI_COMM_WORLD);
  while (true) {
    MPI_Status st;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    if (st.MPI_TAG == kStop) {
      receive(st);
      return;
    }
    uint64_t i = 0;
    MPI_Recv(&i, 1, MPI_UINT64_T, 0, kWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const std::vector<char> buf = encode(run_one(plan, i));
    MPI_Send(buf.data(), int(buf.size()), MPI_CHAR, 0, kResult, MPI_COMM_WORLD);
  }
}

}  // namespace precsim

// precsim sweep: many training runs from one sweep file, on local worker processes or MPI ranks,
// resumable, merged into D/sweep.json. Parsing, printing and report assembly only: the plan, the
// executors and the merge are the experiment layer's (precsim/sim/experiment/sweep_*.h).
#include <omp.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli_common.h"
#include "sweep_lock.h"
#include "precsim/reports/result_file.h"
#include "precsim/sim/experiment/sweep_local.h"
#include "precsim/sim/experiment/sweep_merge.h"
#include "precsim/sim/experiment/sweep_unit.h"
#if PRECSIM_HAVE_MPI
#include "precsim/sim/experiment/sweep_mpi.h"
#endif

namespace precsim::cli {
namespace {

namespace fs = std::filesystem;

struct Args {
  std::string plan;
  std::string out_dir;
  int jobs = 1;
  bool dry_run = false;
  std::string executor = "auto";
  std::string unit;  // hidden: run this one unit (a local worker)
  bool json = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("sweep file '" + path + "': cannot open it");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SweepPlan plan_from_text(const std::string& text, const std::string& path) {
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError("sweep file '" + path + "': not valid JSON: " + e.what());
  }
  try {
    return plan_sweep(spec);
  } catch (const std::invalid_argument& e) {
    throw UsageError("sweep file '" + path + "': " + e.what());
  }
}

void print_dry_run(const SweepPlan& plan) {
  std::cout << fmt::format("{} units over {}\n{:>5} {:<16} {:>10}  point\n", plan.units.size(),
                           nlohmann::json(plan.paths).dump(), "unit", "id", "cost");
  for (const SweepUnit& u : plan.units)
    std::cout << fmt::format("{:>5} {:<16} {:>10.3g}  {}\n", u.index, u.id, u.cost, u.point.dump());
}

// A local worker: one unit, its report written atomically.
void run_one_unit(const SweepPlan& plan, const Args& a) {
  for (const SweepUnit& u : plan.units)
    if (u.id == a.unit) {
      std::string text;
      try {
        text = run_sweep_unit(u);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("unit {} (point {}): {}", u.index, u.point.dump(), e.what()));
      }
      write_result_file(unit_report_path(a.out_dir, u), text);
      return;
    }
  throw UsageError("--unit '" + a.unit + "' is not a unit of this sweep (precsim sweep PLAN --dry-run lists them)");
}

// Units done, running and left, and the time left from the work done so far (costs).
class Progress {
 public:
  Progress(const SweepPlan& plan, const std::vector<size_t>& todo) : left_(todo.size()) {
    for (size_t i : todo) cost_left_ += plan.units[i].cost;
  }
  void started(const SweepUnit& u) {
    if (seen_.insert(u.index).second) ++running_, --left_;  // a unit run again counts once
  }
  void finished(const SweepUnit& u, const std::string& error) {
    --running_;
    ++done_;
    cost_done_ += u.cost;
    cost_left_ -= u.cost;
    if (!error.empty()) failed_.push_back(fmt::format("unit {} ({}): {}", u.index, u.id, error));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta = cost_done_ > 0 ? elapsed * cost_left_ / cost_done_ : 0;
    if (error.empty() && progress_mode() == ProgressMode::kNone) return;
    std::cerr << fmt::format("sweep: {} done, {} running, {} left, {:.1f} s elapsed, about {:.0f} s left{}\n", done_,
                             running_, left_, elapsed, eta, error.empty() ? "" : "; unit " + u.id + " failed: " + error);
  }
  const std::vector<std::string>& failed() const { return failed_; }

 private:
  std::set<size_t> seen_;
  size_t done_ = 0, running_ = 0, left_ = 0;
  double cost_done_ = 0, cost_left_ = 0;
  std::vector<std::string> failed_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

using Execute = std::function<void(const std::vector<size_t>& order, const SweepHooks& hooks)>;

void write_merge(const SweepPlan& plan, const Args& a, const InterruptGuard& guard, const Progress& progress) {
  const SweepMerge m = merge_sweep(plan, a.out_dir);
  Report r("sweep");
  r.config() = sweep_report_config(plan);
  r.seeds() = {{"seed", plan.base["seed"]}};
  r.results() = m.results;
  if (!m.missing.empty()) r.set_status("interrupted");
  const std::string text = r.document(/*deterministic=*/true).dump(2) + "\n";
  write_result_file(fs::path(a.out_dir) / "sweep.json", text);
  note() << "wrote " << (fs::path(a.out_dir) / "sweep.json").string() << "\n";
  if (a.json) std::cout << text;
  else std::cout << sweep_points_table(m.results);
  if (guard.requested())
    throw Interrupted(fmt::format("interrupted by signal {} with {} of {} units finished; {}/sweep.json holds them and a rerun "
                                  "runs the rest", guard.signal(), plan.units.size() - m.missing.size(), plan.units.size(), a.out_dir),
                      guard.exit_code());
  if (!progress.failed().empty()) {
    std::string list;
    for (const auto& f : progress.failed()) list += "\n  " + f;
    throw std::runtime_error(fmt::format("{} units failed; the merge holds the rest:{}", progress.failed().size(), list));
  }
}

// `lock`: the caller's lock_out_dir, taken before anything else could have started.
void drive(const SweepPlan& plan, const Args& a, int lock, const Execute& execute) {
  const SweepLockRelease release(lock);
  const InterruptGuard guard;
  const std::vector<size_t> todo = unfinished_units(plan, a.out_dir);
  note() << fmt::format("sweep: {} units, {} finished already, {} to run\n", plan.units.size(), plan.units.size() - todo.size(),
                           todo.size());
  Progress progress(plan, todo);
  SweepHooks hooks;
  hooks.stop = [&guard] { return guard.requested(); };
  hooks.started = [&](const SweepUnit& u) { progress.started(u); };
  hooks.finished = [&](const SweepUnit& u, const std::string& e) { progress.finished(u, e); };
  execute(longest_first(plan, todo), hooks);
  write_merge(plan, a, guard, progress);
}

std::vector<std::string> worker_argv(const Args& a, const SweepUnit& u, int threads) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  return {self, "--threads", std::to_string(threads), "sweep", a.plan, "--out-dir", a.out_dir, "--unit", u.id};
}

void run_local_sweep(const SweepPlan& plan, const Args& a) {
  LocalExecutor ex;
  ex.jobs = a.jobs;
  // The threads this process may use (--threads, else every core), shared among the workers.
  const int threads = std::max(1, omp_get_max_threads() / a.jobs);
  ex.worker_argv = [&a, threads](const SweepUnit& u) { return worker_argv(a, u, threads); };
  drive(plan, a, lock_out_dir(a.out_dir),
        [&](const std::vector<size_t>& order, const SweepHooks& hooks) { run_local(plan, order, ex, hooks); });
}

#if PRECSIM_HAVE_MPI
// Every rank parses the arguments; rank 0 reads and checks the sweep file and passes it on.
void run_mpi_sweep(const Args& a) {
  const MpiSweep mpi(nullptr, nullptr);
  if (mpi.rank() != 0) {
    const std::string text = mpi.share("");
    if (!text.empty()) mpi.serve(plan_from_text(text, a.plan));
    return;
  }
  std::string text;
  SweepPlan plan;
  int lock = -1;
  try {
    text = read_text(a.plan);
    plan = plan_from_text(text, a.plan);
    if (!a.dry_run) lock = lock_out_dir(a.out_dir);
  } catch (...) {
    mpi.share("");
    throw;
  }
  mpi.share(a.dry_run ? "" : text);
  if (a.dry_run) return print_dry_run(plan);
  note() << fmt::format("sweep: MPI executor on {} ranks\n", mpi.size());
  drive(plan, a, lock, [&](const std::vector<size_t>& order, const SweepHooks& hooks) { mpi.lead(plan, order, a.out_dir, hooks); });
}
#endif

void run(const Args& a) {
  const bool mpi_launch = started_by_mpi_launcher() && a.unit.empty();
#if PRECSIM_HAVE_MPI
  if (mpi_launch && a.executor != "local") return run_mpi_sweep(a);
#endif
  if (a.executor == "mpi")
    throw UsageError(mpi_launch ? "--executor mpi: this precsim was built without MPI (install libopenmpi-dev, reconfigure)"
                                : "--executor mpi: start precsim under mpirun (mpirun -n N precsim sweep ...)");
  if (mpi_launch && a.executor == "auto")
    throw UsageError("started by mpirun, but this precsim was built without MPI: every rank would run every unit; "
                     "install libopenmpi-dev and reconfigure, or give --executor local");
  const SweepPlan plan = plan_from_text(read_text(a.plan), a.plan);
  if (a.dry_run) return print_dry_run(plan);
  if (!a.unit.empty()) return run_one_unit(plan, a);
  run_local_sweep(plan, a);
}

const Registrar reg(65, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "many training runs from one sweep file: local worker processes or MPI ranks, "
                                          "resumable, merged into OUT_DIR/sweep.json");
  auto a = std::make_shared<Args>();
  cmd->add_option("plan", a->plan, "sweep file (JSON: base, grid, list)")->required();
  cmd->add_option("--out-dir", a->out_dir, "folder of the unit reports (units/ID.json) and the merge (sweep.json)");
  cmd->add_option("--jobs", a->jobs, "local worker processes (default 1); results do not depend on it")->check(CLI::Range(1, 1024));
  cmd->add_flag("--dry-run", a->dry_run, "list the units (index, id, cost, point) and run nothing");
  cmd->add_option("--executor", a->executor, "auto (default: MPI when started by mpirun, else local) | local | mpi")
      ->check(CLI::IsMember({"auto", "local", "mpi"}));
  cmd->add_flag("--json", a->json, "print the JSON report on stdout and nothing else");
  cmd->add_option("--unit", a->unit, "run one unit (what a local worker runs)")->group("");
  cmd->callback([a] {
    if (!a->dry_run && a->out_dir.empty()) throw UsageError("--out-dir is required (or --dry-run)");
    run(*a);
  });
});

}  // namespace
}  // namespace precsim::cli

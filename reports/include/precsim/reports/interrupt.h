// Ctrl-C and SIGTERM for long runs: the signal only sets a flag; the run polls it between steps,
// stops, and writes a report of what finished marked "status": "interrupted" (docs/CONVENTIONS.md, Reports).
//
// How a long-running command uses it:
//
//   InterruptGuard guard;                         // installs SIGINT/SIGTERM handlers
//   for (int64_t step = 0; step < steps; ++step) {
//     if (guard.requested()) break;               // poll between units of work, never inside one
//     ... one step ...
//   }
//   if (guard.requested()) report.set_status("interrupted");
//   emit_report(report, out);                     // the report holds every finished step
//   return guard.requested() ? guard.exit_code() : 0;   // 130 after SIGINT, 143 after SIGTERM
//
// A second signal while the first is being handled restores the default action and re-raises it,
// so a user can always kill a run that does not poll. Reports are written atomically
// (write_file_atomic), so even that kill never leaves a partial file.
#pragma once

namespace precsim {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers (and clears any earlier request)
  ~InterruptGuard();  // restores the handlers that were there before
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  bool requested() const;  // a SIGINT or SIGTERM arrived since construction
  int signal() const;      // which one (0 if none)
  int exit_code() const;   // 128 + signal, the shell's convention
};

// The same flag without a guard object, for code deep in a loop that has no access to it.
bool interrupt_requested();

// Sets the flag as a signal would (tests, and callers that turn other events into a stop).
void request_interrupt(int signal_number);

}  // namespace precsim

#include "precsim/reports/interrupt.h"

#include <atomic>
#include <csignal>

namespace precsim {
namespace {

// Lock-free atomics are async-signal-safe; nothing else is touched in the handler.
std::atomic<int> g_signal{0};
struct sigaction g_old_int {};
struct sigaction g_old_term {};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) {
    // Second signal: the user insists. Default action (terminate) now.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocking read is not failed by the signal; the loop polls instead
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptGuard::requested() const { return g_signal.load() != 0; }
int InterruptGuard::signal() const { return g_signal.load(); }
int InterruptGuard::exit_code() const { return 128 + g_signal.load(); }

bool interrupt_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
void request_interrupt(int signal_number) { g_signal.store(signal_number); }

}  // namespace precsim

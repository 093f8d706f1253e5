// Ctrl-C in the engine's long calls (train, gemm, analyze, quantize and encode of large arrays).
// They run without the GIL, so Python's SIGINT handler would wait for them to return. The loop
// polls a SignalPoll between units of work instead: on the thread that made it (the one Python
// called in on; only the main thread runs signal handlers) it takes the GIL at most every 20 ms
// and runs the pending handlers (PyErr_CheckSignals). Once a handler raised (SIGINT's raises
// KeyboardInterrupt), poll() stays true; the call then stops and rethrow() raises that exception.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace precsim::py {

class SignalPoll {
 public:
  SignalPoll();  // with the GIL
  ~SignalPoll();
  SignalPoll(const SignalPoll&) = delete;
  SignalPoll& operator=(const SignalPoll&) = delete;

  bool poll();  // without the GIL: true once a signal handler raised
  bool raised() const { return raised_.load(); }
  // With the GIL, after raised(): sets attribute `name` of the handler's exception (the partial
  // report of an interrupted train), then raises it.
  void set_attr(const char* name, nanobind::handle value);
  [[noreturn]] void rethrow();

 private:
  std::thread::id owner_;
  std::chrono::steady_clock::time_point next_;
  std::atomic<bool> raised_{false};  // read by every thread that polls
  PyObject *type_ = nullptr, *value_ = nullptr, *trace_ = nullptr;
};

// body(begin, end) over [0, n) in chunks of `chunk` elements without the GIL, polling between
// them; a handler's exception is raised after the chunk in progress.
template <class F>
void run_in_chunks(size_t n, size_t chunk, F&& body) {
  SignalPoll signals;
  {
    nanobind::gil_scoped_release release;
    for (size_t begin = 0; begin < n; begin += chunk) {
      body(begin, std::min(n, begin + chunk));
      if (signals.poll()) break;
    }
  }
  if (signals.raised()) signals.rethrow();
}

}  // namespace precsim::py

#include "signals.h"

namespace precsim::py {
namespace {

constexpr std::chrono::milliseconds kEvery{20};

}  // namespace

SignalPoll::SignalPoll() : owner_(std::this_thread::get_id()), next_(std::chrono::steady_clock::now() + kEvery) {}

SignalPoll::~SignalPoll() {
  Py_XDECREF(type_);
  Py_XDECREF(value_);
  Py_XDECREF(trace_);
}

bool SignalPoll::poll() {
  if (raised()) return true;
  // Other threads (OpenMP workers, a caller's own thread) never run Python's handlers.
  if (std::this_thread::get_id() != owner_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + kEvery;
  nanobind::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  // Kept aside, not left pending: the loop's own code may run Python (progress) before it stops.
  PyErr_Fetch(&type_, &value_, &trace_);
  PyErr_NormalizeException(&type_, &value_, &trace_);
  raised_ = true;
  return true;
}

void SignalPoll::set_attr(const char* name, nanobind::handle value) {
  if (value_ && PyObject_SetAttrString(value_, name, value.ptr()) != 0) PyErr_Clear();
}

void SignalPoll::rethrow() {
  PyErr_Restore(type_, value_, trace_);
  type_ = value_ = trace_ = nullptr;
  raised_ = false;
  throw nanobind::python_error();
}

}  // namespace precsim::py

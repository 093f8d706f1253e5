// The Python oracles of the differential tests (ml_dtypes, MMA-Sim): which interpreter runs their
// helper script, and what the helper's exit status means for the test.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

namespace precsim::testing {

// $PRECSIM_VENV_PYTHON, else build/venv/bin/python of the source tree (scripts/setup.sh makes it).
inline std::string oracle_python() {
  if (const char* p = std::getenv("PRECSIM_VENV_PYTHON"); p && *p) return p;
  return std::string(PRECSIM_SOURCE_DIR) + "/build/venv/bin/python";
}

// Where CI or PRECSIM_REQUIRE_ORACLES is set (as scripts/test.sh does), a missing oracle fails.
inline bool oracle_required() {
  for (const char* var : {"CI", "PRECSIM_REQUIRE_ORACLES"})
    if (const char* v = std::getenv(var); v && *v && std::string(v) != "0") return true;
  return false;
}

struct OracleStatus {
  bool ran = false;   // the helper exited 0
  bool skip = false;  // the oracle is missing and not required: skip the tests
  std::string why;
};

// The helper exits 3 when its package cannot be imported, the shell 126/127 when the interpreter
// cannot run: a skip, or a failure where the oracle is required. Any other failure is a failure.
inline OracleStatus oracle_status(int status, const std::string& package) {
  OracleStatus s;
  s.ran = status == 0;
  if (s.ran) return s;
  s.why = package + " reference failed (" + oracle_python() + " exited " + std::to_string(status) + ")";
  if (status != 3 && status != 126 && status != 127) return s;
  if (oracle_required()) {
    s.why += ": " + package + " is required where CI or PRECSIM_REQUIRE_ORACLES is set";
    return s;
  }
  s.skip = true;
  s.why += ": no Python with " + package + "; set PRECSIM_VENV_PYTHON or run scripts/setup.sh";
  return s;
}

// An oracle's result equals ours: the same double with the same sign (a zero's included), any NaN
// equal to any NaN (payloads and NaN signs are not compared).
inline bool same_result(double ours, double theirs) {
  if (std::isnan(ours) || std::isnan(theirs)) return std::isnan(ours) && std::isnan(theirs);
  return ours == theirs && std::signbit(ours) == std::signbit(theirs);
}

}  // namespace precsim::testing

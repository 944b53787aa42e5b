// Helpers for the fault-injection suite: CPU comms with a short timeout, allreduces whose every
// result is checked against an exact reference, and timing.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "symmar/symmar.h"

namespace fault {

/// Joins a CPU comm of world ranks (nullptr on failure; *res receives the code when given).
symmarComm_t initCpu(const symmarUniqueId& id, int world, int rank, int timeout_ms, symmarResult_t* res = nullptr);

/// One allreduce of count floats whose inputs depend on (rank, iteration): small integers, so the
/// reference sum (computed here in double, independently of the library) is exact. Returns the
/// call's code; *wrong is set when the call returned success with any element off.
symmarResult_t checkedAllReduce(symmarComm_t comm, int rank, int world, size_t count, int iteration, bool* wrong,
                                symmarAlgo_t algo = symmarAlgoAuto);

/// Seconds since start.
inline double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Sleeps ms milliseconds.
void sleepMs(int ms);

}  // namespace fault

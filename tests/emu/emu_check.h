// Inputs and the float64 reference for emulated allreduce cases, from tests/common/reference.h:
// independent of the kernels' code and of the library's own conversions.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/reference.h"
#include "symmar/symmar.h"

namespace symmar {
namespace emu {

/// Calls in the long sequences (drift, persistent state): SYMMAR_EMU_LONG_CALLS, else 1,000. The
/// sanitizer and mutant builds run shorter sequences.
inline int longRunCalls() {
  const char* v = std::getenv("SYMMAR_EMU_LONG_CALLS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 1000;
}

/// Stores v as element i of dst, rounded to dt (round to nearest even), by the reference.
inline void storeAs(symmarDataType_t dt, void* dst, size_t i, double v) { testref::storeElement(dst, dt, i, v); }
/// Element i of src as a double, by the reference.
inline double loadAs(symmarDataType_t dt, const void* src, size_t i) { return testref::loadElement(src, dt, i); }

/// Small integers (exact in every dtype, and so are their sums over 8 ranks), varied by rank,
/// index and call.
inline double inputValue(int rank, size_t i, int call) { return testref::smallIntInput(rank, i, call); }

/// Fills rank r's input of count elements.
inline void fillInput(symmarDataType_t dt, void* dst, size_t count, int rank, int call) {
  testref::fillSmallInts(dt, dst, count, rank, call);
}

/// Checks every rank's output against the float64 reduction of the inputs and that all ranks hold
/// the same bytes. Returns "" when right, else what is wrong.
std::string checkOutputs(symmarDataType_t dt, symmarRedOp_t op, size_t count, int world, int call,
                         const std::vector<void*>& recv);

}  // namespace emu
}  // namespace symmar

// Inputs and the independent float64 reference for emulated allreduce cases.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {
namespace emu {

/// Calls in the long sequences (drift, persistent state): SYMMAR_EMU_LONG_CALLS, else 1,000. The
/// sanitizer and mutant builds run shorter sequences.
inline int longRunCalls() {
  const char* v = std::getenv("SYMMAR_EMU_LONG_CALLS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 1000;
}

/// Converts a value to the dtype's bits (round to nearest even) and back, with CUDA's own host
/// conversions: independent of the kernels' code.
inline void storeAs(symmarDataType_t dt, void* dst, size_t i, double v) {
  switch (dt) {
    case symmarFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(static_cast<char*>(dst) + 4 * i, &f, 4);
      break;
    }
    case symmarFloat16: {
      uint16_t b = __half_as_ushort(__float2half_rn(static_cast<float>(v)));
      std::memcpy(static_cast<char*>(dst) + 2 * i, &b, 2);
      break;
    }
    default: {
      uint16_t b = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v)));
      std::memcpy(static_cast<char*>(dst) + 2 * i, &b, 2);
      break;
    }
  }
}
inline double loadAs(symmarDataType_t dt, const void* src, size_t i) {
  switch (dt) {
    case symmarFloat32: {
      float f;
      std::memcpy(&f, static_cast<const char*>(src) + 4 * i, 4);
      return f;
    }
    case symmarFloat16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(src) + 2 * i, 2);
      return __half2float(__ushort_as_half(b));
    }
    default: {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(src) + 2 * i, 2);
      return __bfloat162float(__ushort_as_bfloat16(b));
    }
  }
}

/// Small integers (exact in every dtype, and so are their sums over 8 ranks), varied by rank,
/// index and call.
inline double inputValue(int rank, size_t i, int call) {
  return static_cast<double>(static_cast<int>((rank * 131 + i * 7 + (i >> 9) + static_cast<size_t>(call) * 3) % 17) -
                             8);
}

/// Fills rank r's input of count elements.
inline void fillInput(symmarDataType_t dt, void* dst, size_t count, int rank, int call) {
  for (size_t i = 0; i < count; ++i) storeAs(dt, dst, i, inputValue(rank, i, call));
}

/// Checks every rank's output against the float64 reduction of the inputs and that all ranks hold
/// the same bytes. Returns "" when right, else what is wrong.
std::string checkOutputs(symmarDataType_t dt, symmarRedOp_t op, size_t count, int world, int call,
                         const std::vector<void*>& recv);

}  // namespace emu
}  // namespace symmar

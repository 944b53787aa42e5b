// How a CUDA comm turns one allreduce call into a kernel launch: the heap layout, which
// input offset peers may read in place, the bounds a peer's input offset must respect, and the
// KernelArgs of the call. No CUDA calls here: the CUDA backend and the kernel emulator
// (tests/emu) use the same functions, so the emulator runs exactly what a GPU would be given.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/symmetric_arena.h"
#include "cuda/kernel_args.h"
#include "symmar/symmar.h"

namespace symmar {
namespace gpu {

/// Layout of every rank's symmetric allocation: [signal pad | staging | user heap].
struct HeapLayout {
  size_t pad_off = 0;
  size_t staging_off = 0;
  size_t staging_bytes = 0;
  size_t heap_off = 0;
  size_t heap_bytes = 0;
  size_t total = 0;  ///< bytes the layout needs before rounding to the allocation granularity
};
/// Pad first, then staging and heap at 256-byte boundaries.
HeapLayout makeLayout(size_t staging_bytes, size_t heap_bytes);

/// What a comm fixes for all its launches.
struct LaunchContext {
  int rank = 0;
  int world = 0;
  char* const* bases = nullptr;  ///< every rank's allocation as mapped here (world entries)
  char* mc_base = nullptr;       ///< multicast mapping of the same layout, or nullptr
  HeapLayout layout;
  bool have_heap = false;
  const SymmetricArena* arena = nullptr;  ///< symmarMemAlloc blocks of the user heap
  DeviceState* state = nullptr;
  volatile int* status = nullptr;
  long long timeout_ns = 0;
};

/// Offset in this rank's allocation that peers may read send from in place, or kStagedInput.
uint64_t inPlaceInputOffset(const LaunchContext& ctx, const void* send, const void* recv, size_t bytes,
                            symmarAlgo_t algo);
/// The input offsets a peer may publish for a call of bytes bytes: [*lo, *lo + *span); span 0 when
/// none fits.
void inputOffsetBounds(const LaunchContext& ctx, size_t bytes, uint64_t* lo, uint64_t* span);
/// Everything a kernel needs for one call.
KernelArgs makeKernelArgs(const LaunchContext& ctx, const void* send, void* recv, size_t count, symmarDataType_t dtype,
                          symmarAlgo_t algo);
/// The kernel serving (algo, dtype, op), or nullptr (no such kernel, or multimem without multicast).
const void* kernelOf(symmarAlgo_t algo, symmarDataType_t dtype, symmarRedOp_t op, bool multicast);

}  // namespace gpu
}  // namespace symmar

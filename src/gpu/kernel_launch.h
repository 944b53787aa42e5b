// How a CUDA comm turns one allreduce call into a kernel launch: the heap layout, which
// input offset peers may read in place, the bounds a peer's input offset must respect, and the
// KernelArgs of the call. No CUDA calls here: the CUDA backend and the kernel emulator
// (tests/emu) use the same functions, so the emulator runs exactly what a GPU would be given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/symmetric_arena.h"
#include "cuda/kernel_args.h"
#include "symmar/symmar.h"

namespace symmar {
namespace gpu {

/// Layout of every rank's symmetric allocation: [staging | signal pad | lamport buffers | user heap].
struct HeapLayout {
  size_t pad_off = 0;
  size_t staging_off = 0;
  size_t staging_bytes = 0;
  size_t lamport_off = 0;
  size_t lamport_bytes = 0;
  size_t heap_off = 0;
  size_t heap_bytes = 0;
  size_t total = 0;  ///< bytes the layout needs before rounding to the allocation granularity
};
/// Staging first (the multicast object binds only it, from offset 0), then pad, lamport buffers (for
/// world ranks) and heap at 256-byte boundaries.
HeapLayout makeLayout(size_t staging_bytes, size_t heap_bytes, int world);
/// Lamport buffers as they must be before the first call: every word kLamportEmpty.
std::vector<uint32_t> initialLamport(int world);
/// A signal pad as it must be before the first kernel: every flag at epoch_start, every failed and
/// probe word 0.
std::vector<char> initialPad(uint32_t epoch_start);

/// What a comm fixes for all its launches.
struct LaunchContext {
  int rank = 0;
  int world = 0;
  char* const* bases = nullptr;  ///< every rank's allocation as mapped here (world entries)
  char* mc_base = nullptr;       ///< multicast mapping of the staging buffers, or nullptr
  HeapLayout layout;
  bool have_heap = false;
  const SymmetricArena* arena = nullptr;  ///< symmarMemAlloc blocks of the user heap
  DeviceState* state = nullptr;
  volatile int* status = nullptr;
  long long timeout_ns = 0;
  int max_blocks = 1;  ///< co-residency cap on a call's grid (agreed across ranks)
  int max_row_parts = kMaxRowParts;  ///< the most blocks a fused row is spread over (agreed across ranks)
  size_t bytes_per_block = kBytesPerBlock;  ///< message bytes per launched block (gridFor)
  size_t lamport_bytes_per_block = kLamportBytesPerBlock;  ///< the same for lamport calls
  size_t spread_bytes_per_block = kSpreadBytesPerBlock;    ///< small calls: kSpreadBlocks at most
};

/// Offset in this rank's allocation that peers may read send from in place, or kStagedInput.
uint64_t inPlaceInputOffset(const LaunchContext& ctx, const void* send, const void* recv, size_t bytes,
                            symmarAlgo_t algo);
/// The input offsets a peer may publish for a call of bytes bytes: [*lo, *lo + *span); span 0 when
/// none fits.
void inputOffsetBounds(const LaunchContext& ctx, size_t bytes, uint64_t* lo, uint64_t* span);
/// Blocks a call launches: one per ctx.bytes_per_block of its (first) chunk, and at least one per
/// ctx.spread_bytes_per_block up to kSpreadBlocks (lamport: one per ctx.lamport_bytes_per_block of
/// the message), at least 1, at most ctx.max_blocks. Depends only on the call and on comm-wide
/// values, so every rank launches the same grid.
int gridFor(const LaunchContext& ctx, size_t count, symmarDataType_t dtype, symmarAlgo_t algo = symmarAlgoOneShot);
/// Threads per block of the kernel serving algo.
int threadsFor(symmarAlgo_t algo);
/// Everything a kernel needs for one call; signature: the call's as peers compare it (core/call.h's
/// callSignature of the call the kernel serves).
KernelArgs makeKernelArgs(const LaunchContext& ctx, const void* send, void* recv, size_t count, symmarDataType_t dtype,
                          symmarAlgo_t algo, uint64_t signature);
/// A reduce-scatter or all-gather (call.coll) by one-shot or multimem (call.algo): the kernel's
/// arguments (count: one rank's block, in the kernel's element: an all-gather of 8-byte elements
/// moves twice as many 4-byte ones); *grid receives the blocks to launch, the same on every rank.
KernelArgs makeScatterGatherArgs(const LaunchContext& ctx, const ScatterGatherCall& call, int* grid);
/// The kernel serving a reduce-scatter or all-gather of (dtype, op) by algo, or nullptr (no such
/// kernel, or multimem without multicast).
const void* scatterGatherKernelOf(symmarAlgo_t algo, Collective coll, symmarDataType_t dtype, symmarRedOp_t op,
                                  bool multicast);
/// The fused allreduce + residual add + RMSNorm of call in `form` (one-shot or two-shot: the form
/// that runs, fitAddRmsNormForm's; or lamport, where sched::lamportFusedFits). Peers read the input
/// in place where fusedInputOffset allows, staged otherwise (lamport pushes it). *grid receives
/// the blocks to launch: one per row, at most ctx.max_blocks, or tokens x addRmsNormRowParts.
KernelArgs makeAddRmsNormArgs(const LaunchContext& ctx, const AddRmsNormCall& call, symmarAlgo_t form, int* grid);
/// Blocks each row of the fused call is spread over: about one 16-byte vector a thread (`threads`
/// a block: kThreads for the staged forms, kLamportThreads for lamport), at most max_parts
/// (kMaxRowParts at most), with tokens x parts blocks within max_blocks (the co-residency cap; both
/// agreed across ranks, so every rank computes the same); 1 where rows are not whole vectors.
int addRmsNormRowParts(const AddRmsNormCall& call, int max_blocks, int max_parts = kMaxRowParts,
                       int threads = kThreads);
/// The add and norm of call alone (addRmsNormRowsKernel), from the allreduce's sums of it at
/// `sums` (tokens x hidden of call.dtype). *grid receives the blocks: one per row, at most
/// max_grid (each takes every grid-th row): kAddRmsNormRowsBlocks, or the co-residency cap where
/// ranks share a GPU (with PDL this grid may become resident while the rank's allreduce still
/// waits for its peers' grids, whose room the cap keeps).
constexpr int kAddRmsNormRowsBlocks = 1024;
KernelArgs makeAddRmsNormRowsArgs(const AddRmsNormCall& call, const void* sums, int max_grid, int* grid);
/// Where peers read the fused call's input: its offset in this rank's user heap when it lies in
/// the symmetric heap, has rows of whole 16-byte vectors and no output of the call overlaps it (the
/// two-shot form also takes an output that is the input itself); kStagedInput otherwise.
uint64_t fusedInputOffset(const LaunchContext& ctx, const AddRmsNormCall& call, bool two_shot);
/// Staging bytes one row of the fused kernel of this form takes in a staging half: the input row
/// (one-shot), or the row padded to 16 bytes (two-shot, whose sums are published at that stride):
/// sched::fusedRowBytes.
size_t addRmsNormRowBytes(const AddRmsNormCall& call, bool two_shot);
/// Rows of a chunk the fused kernel of this form moves through a staging half (0: a row does not
/// fit, or the call is empty).
size_t addRmsNormRowsPerChunk(const LaunchContext& ctx, const AddRmsNormCall& call, bool two_shot);
/// Co-scheduling probe: rounds, and the bound shared by every round after the first. Kernels that
/// run concurrently meet in about a microsecond a round (64 rounds: ~0.1 ms); serialised or
/// time-sliced ones need a context switch a round, far more than 2 ms for 63 of them.
constexpr int kProbeRounds = 64;
constexpr long long kProbeRestNs = 2000000;
/// The probe kernels' arguments; result points at kProbeResultWords long longs the kernel fills
/// (ProbeArgs). The peer-access probe also needs seed, equal on every rank, and rest_ns, the bound
/// of its checks (kP2pCheckNs).
ProbeArgs makeProbeArgs(const LaunchContext& ctx, long long* result);
/// Bound of the peer-access probe's checks: 4 KiB loaded across the link and 2 KiB locally take a few
/// microseconds on a working link; one rerouted through the host or retried takes far longer.
constexpr long long kP2pCheckNs = 2000000;
/// The kernel serving (algo, dtype, op), or nullptr (no such kernel, or multimem without multicast).
const void* kernelOf(symmarAlgo_t algo, symmarDataType_t dtype, symmarRedOp_t op, bool multicast);
/// A kernel a comm may launch, with its threads per block.
struct KernelShape {
  const void* kernel;
  int threads;
};
/// Every kernel a comm may launch (allreduce kernels of every dtype and op, both fused forms and the
/// unfused call's add + norm) from the one kernel list kernelOf and threadsFor read: what the
/// co-residency cap must cover. Entries may be null (a build without that kernel).
std::vector<KernelShape> everyKernel();

}  // namespace gpu
}  // namespace symmar

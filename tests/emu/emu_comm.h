// N emulated ranks in one process: allocations laid out exactly like the GPU symmetric heap
// (signal pad, staging halves, user heap at equal offsets), each rank's DeviceState and status
// words, an optional multicast group, and calls launched through the same host code as the CUDA
// backend (gpu/kernel_launch.h).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emu/emu_runtime.h"
#include "gpu/kernel_launch.h"

namespace symmar {
namespace emu {

struct EmuOptions {
  int world = 2;
  int blocks = 2;                 ///< co-residency cap: the most blocks a call launches
  size_t bytes_per_block = 1024;  ///< small, so that calls of a few KiB already run several blocks
  size_t staging_bytes = 8192;
  size_t heap_bytes = 1 << 20;
  uint32_t epoch_start = 0;
  bool multicast = true;
  int timeout_ms = 20000;
  /// As a pcie-nop2p comm builds it: every rank's allocation a shared memfd mapping (the segments a
  /// GPU box registers as pinned host memory) and no user heap (inputs are always staged).
  bool host_staged = false;
};

/// One allreduce (or reduce-scatter, all-gather: coll, count of one rank's block) as every rank
/// issues it.
struct EmuCall {
  symmarAlgo_t algo;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  std::vector<const void*> send;  ///< per rank
  std::vector<void*> recv;        ///< per rank
  Collective coll = Collective::kAllReduce;
};

class EmuComm {
 public:
  explicit EmuComm(const EmuOptions& o);
  ~EmuComm();
  EmuComm(const EmuComm&) = delete;
  EmuComm& operator=(const EmuComm&) = delete;

  int world() const { return o_.world; }
  const EmuOptions& options() const { return o_; }
  char* base(int r) const { return bases_[static_cast<size_t>(r)]; }
  /// Allocates bytes of every rank's user heap at the same offset (as symmarMemAlloc does).
  std::vector<char*> symmetricAlloc(size_t bytes);
  /// The launch context of rank r (what CudaBackend::launchContext gives).
  gpu::LaunchContext context(int r) const;
  /// Builds each rank's KernelArgs with gpu::makeKernelArgs and grid with gpu::gridFor, and runs
  /// the ranks in `launching` (all when empty) concurrently. False when no kernel serves the call.
  bool run(const EmuCall& call, const std::vector<int>& launching = {});
  /// Rank r's launch of call (its KernelArgs as run() builds them), for launchOn.
  Launch launchOf(int r, const EmuCall& call) const;
  /// Rank r's launch of the fused call c in `form` (one-shot, two-shot or lamport), as the CUDA
  /// backend builds it; blocks 0 when the call does not fit the form.
  Launch addRmsNormLaunchOf(int r, const AddRmsNormCall& c, symmarAlgo_t form) const;
  /// Rank r's launch of the fused lamport call that the failure tests run: float32 rows
  /// [tokens, hidden] of in, no residual_in, residual_out to out, norm to norm, eps 1e-6, no FP8.
  Launch fusedLamportF32LaunchOf(int r, const float* in, float* out, float* norm, const float* gamma, size_t tokens,
                                 size_t hidden) const {
    const AddRmsNormCall c{in, nullptr, out, norm, gamma, nullptr, 1.0f, 1e-6f, tokens, hidden, symmarFloat32};
    return addRmsNormLaunchOf(r, c, symmarAlgoLamport);
  }
  /// Runs rank r's launch on rank r's own lane and returns when its kernel has finished, as a
  /// stream would: called from a thread per rank, ranks run their calls back to back, each at its
  /// own pace, with no join between calls.
  void launchOn(int r, const Launch& launch) const { runOnLane(r, launch); }
  /// Runs the fused allreduce + residual add + RMSNorm in `form`, calls[r] being rank r's; false
  /// when the call does not fit the form (a row too large for the staging buffer or a lamport slot).
  bool runAddRmsNorm(const std::vector<AddRmsNormCall>& calls, symmarAlgo_t form);
  /// Runs the co-scheduling probe kernel on the ranks in `launching` (all when empty), all at once
  /// or (sequential) one rank after another; returns each launched rank's two result words.
  std::vector<std::array<long long, 2>> probe(const std::vector<int>& launching, bool sequential);
  /// Runs the peer-access probe on every rank at once and returns each rank's result words. With
  /// lying_from >= 0, rank lying_from's mapping of rank lying_to is a scratch buffer: its stores
  /// there vanish and its loads read zeros, as over a link the IOMMU or ACS breaks.
  std::vector<std::array<long long, gpu::kProbeResultWords>> peerAccessProbe(uint32_t seed, int lying_from = -1,
                                                                             int lying_to = -1);
  /// Rank r's status words: [0] result code, [1] peer, [2] block.
  const int* status(int r) const { return status_[static_cast<size_t>(r)].words; }
  gpu::DeviceState& state(int r) { return *states_[static_cast<size_t>(r)]; }

 private:
  struct Status {
    int words[gpu::kStatusWords] = {};
  };
  EmuOptions o_;
  gpu::HeapLayout layout_;
  size_t bytes_ = 0;  ///< of each rank's allocation
  std::vector<char*> bases_;
  std::vector<SymmetricArena> arenas_;
  std::vector<std::unique_ptr<gpu::DeviceState>> states_;
  std::vector<Status> status_;
  std::vector<char> mc_range_;  ///< address range standing for the multicast mapping
  MulticastGroup group_;
};

/// Runs calls on one comm, each with fresh inputs (fillInput with the call number), and checks each
/// result against the float64 reference (checkOutputs) and the ranks' status words.
class CallRunner {
 public:
  explicit CallRunner(EmuComm& comm);
  /// One call of up to 64 KiB a rank; symmetric: the input from symmarMemAlloc-like memory. Returns
  /// "" when every rank got the right result, else what went wrong.
  std::string call(symmarAlgo_t algo, symmarDataType_t dt, symmarRedOp_t op, size_t count, bool symmetric, int n);

 private:
  static constexpr size_t kMaxBytes = 64 << 10;
  EmuComm& comm_;
  std::vector<std::vector<char>> send_, recv_;
  std::vector<char*> sym_;  ///< allocated on first use (a host-staged comm has no user heap)
};

}  // namespace emu
}  // namespace symmar

// The CUDA backend class: symmetric heap, kernels for the symmetric algorithms and the fused call,
// NCCL for the rest. Comm creation reaches it through gpu_entry.h only.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/names.h"
#include "core/symmetric_arena.h"
#include "cuda/kernel_args.h"
#include "gpu/nccl_fallback.h"
#include "gpu/kernel_launch.h"
#include "gpu/host_staged_heap.h"
#include "gpu/peer_probe.h"
#include "gpu/sym_heap.h"
#include "gpu/topology.h"

namespace symmar {
namespace gpu {

/// Makes the comm's device current for the scope and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device) cudaSetDevice(device);
    switched_ = prev_ != device && prev_ >= 0;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = -1;
  bool switched_ = false;
};

/// How a CUDA comm's kernels reach their peers' data: the one fact every launch, allocation and
/// probe asks about. Multicast stays a separate capability (topology and heap).
enum class DataPath {
  kFallbackOnly,  ///< no symmetric kernel (ranks on several hosts, no kernel image, a failed probe)
  kPeer,          ///< the kernels load and store peers' device memory (NVLink, PCIe peer access)
  kHostStaged,    ///< the kernels stage through pinned host memory (no peer access)
};

class CudaBackend : public Backend {
 public:
  /// host_stage: this backend serves the ranks of one host inside a hierarchical comm, whose own
  /// NCCL communicator serves the nccl algorithm; it then makes none of its own.
  explicit CudaBackend(const BackendContext& ctx, bool host_stage = false)
      : ctx_(ctx), host_stage_(host_stage), arena_(0) {}
  ~CudaBackend() override;

  /// Collective: probes, builds the heap and the device state; reports the topology and staging.
  symmarResult_t init(BackendFacts* facts);

  symmarResult_t allReduce(const AllReduceCall& call) override;
  symmarResult_t allReduceAddRmsNorm(const AddRmsNormCall& call) override;
  symmarResult_t addRmsNormRows(const AddRmsNormCall& call, const void* sums) override;  // backend_fused.cc
  /// Every rank's GPU has this build's kernel images (initBlocks): the add + norm kernel runs
  /// without peers, so it serves where the data path is the fallback's too.
  bool hasAddRmsNormRows() const override { return kernel_images_; }
  /// The one-shot pattern's kernels (cuda/scatter_gather.cu) or NCCL's.
  symmarResult_t scatterGather(const ScatterGatherCall& call) override;
  symmarResult_t memAlloc(size_t bytes, void** ptr) override;
  symmarResult_t memFree(void* ptr) override;
  symmarResult_t asyncError() override;
  void noteCommFailed() override { comm_failed_ = true; }
  uint32_t fallbacks() const override { return nccl_ok_ ? algoBit(symmarAlgoNccl) : 0u; }
  symmarResult_t adoptNccl(void* nccl_comm) override { return nccl_.adopt(nccl_comm); }

 private:
  symmarResult_t resolveSettings();
  symmarResult_t initBlocks();
  symmarResult_t initDeviceState();
  // Start-up probes (startup_probes.cc), collective; a failure turns the symmetric kernels off.
  /// The probes planStartupProbes asks for, in its order; a broken link moves the staging to host
  /// memory on every rank.
  symmarResult_t runStartupProbes(P2pMode p2p);
  /// The kernels of ranks sharing a GPU must run concurrently.
  symmarResult_t probeCoScheduling();
  /// SYMMAR_P2P as every rank will apply it: the most careful mode any rank asks for.
  symmarResult_t agreeP2pMode(P2pMode* mode);
  /// Peer access over PCIe must deliver what it claims; *broken: some pair did not (every rank).
  symmarResult_t probePeerAccess(bool* broken);
  /// Per rank: whether it runs on this rank's GPU.
  std::vector<bool> onMyGpu() const;
  /// Runs one probe kernel on a stream of its own and waits; out gets its kProbeResultWords words.
  cudaError_t runProbe(const void* kernel, ProbeArgs args, long long* out);
  /// The only writer of the data path and what follows from it: the link and multicast the
  /// planner sees, and the heap layout (no user heap in host memory). Every rank decides alike.
  void setPath(DataPath path);
  bool kernelsRun() const { return path_ != DataPath::kFallbackOnly; }
  bool peersShareHeap() const { return path_ == DataPath::kPeer; }
  /// symmarMemAlloc hands out the symmetric device heap (else plain device memory nobody else reads).
  bool deviceHeapServes() const { return have_heap_ && path_ != DataPath::kHostStaged; }
  /// Adds one finding to checks_ (what symmarCommDescribe reports).
  void noteCheck(const std::string& what) { checks_ += (checks_.empty() ? "" : ", ") + what; }
  // The shared heap (backend_heap.cc).
  /// Collective: the device heap (peer access) or the host-staged heap, and bases_ from it.
  symmarResult_t buildHeap();
  /// Every flag of this rank's pad at the start epoch and its lamport buffers empty (before any
  /// kernel of any rank runs).
  symmarResult_t initPad();
  /// What every launch of this comm shares (kernel_launch.h builds the call's KernelArgs from it).
  LaunchContext launchContext() const;
  /// Launches kernel (programmatic dependent launch where enabled).
  symmarResult_t launch(const void* kernel, int grid, int threads, KernelArgs* args, cudaStream_t stream);
  /// The fused call's lamport form (backend_fused.cc).
  symmarResult_t lamportAddRmsNorm(const LaunchContext& lc, const AddRmsNormCall& call);

  BackendContext ctx_;
  const bool host_stage_;
  int device_ = -1;
  int timeout_ms_ = 0;
  uint32_t epoch_start_ = 0;
  int nblocks_ = 1;
  int row_parts_ = 1;  ///< the most blocks a fused row is spread over (SYMMAR_FUSED_ROW_PARTS, agreed)
  long long timeout_ns_ = 0;
  Topology topo_;
  HeapLayout layout_;
  SymmetricHeap heap_;
  HostStagedHeap host_heap_;
  DataPath path_ = DataPath::kFallbackOnly;
  bool have_heap_ = false;  ///< every rank on this host: a heap is built (even with the kernels off)
  std::vector<char*> bases_;  ///< every rank's allocation as mapped here (when have_heap_)
  SymmetricArena arena_;
  std::set<void*> plain_allocs_;  ///< symmarMemAlloc without a heap (ranks on several hosts)
  DeviceState* state_ = nullptr;
  int* status_host_ = nullptr;    ///< mapped pinned memory the kernels report timeouts into
  int* status_dev_ = nullptr;
  NcclFallback nccl_;
  bool nccl_ok_ = false;
  std::atomic<bool> comm_failed_{false};  ///< a call failed the comm (a timeout or lost peer, noteCommFailed)
  bool pdl_ = false;  ///< launch with programmatic dependent launch (SYMMAR_PDL, sm_90+)
  bool kernel_images_ = false;  ///< every rank's GPU has this build's kernels (agreed in initBlocks)
  std::string checks_;  ///< what the start-up checks found or turned off (BackendFacts::checks)
};

}  // namespace gpu
}  // namespace symmar

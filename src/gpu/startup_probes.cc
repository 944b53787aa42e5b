// The CUDA backend's start-up probes (kernels in cuda/probe.cu): run once at comm creation, their
// verdict agreed by every rank, a failure turning the symmetric kernels off for the comm.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_backend.h"
#include "gpu/peer_probe.h"
#include "gpu/startup_policy.h"

namespace symmar {
namespace gpu {

cudaError_t CudaBackend::runProbe(const void* kernel, ProbeArgs args, long long* out) {
  long long* result = nullptr;
  long long* result_dev = nullptr;
  cudaStream_t stream = nullptr;
  auto run = [&]() -> cudaError_t {
    cudaError_t e = cudaHostAlloc(reinterpret_cast<void**>(&result), kProbeResultWords * sizeof(long long),
                                  cudaHostAllocMapped);
    if (e != cudaSuccess) return e;
    std::memset(result, 0, kProbeResultWords * sizeof(long long));
    if ((e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&result_dev), result, 0)) != cudaSuccess) return e;
    if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) return e;
    args.result = result_dev;
    void* params[] = {&args};
    if ((e = cudaLaunchKernel(kernel, dim3(1), dim3(kThreads), params, 0, stream)) != cudaSuccess) return e;
    return cudaStreamSynchronize(stream);
  };
  const cudaError_t err = cudaQuiet(run());
  if (err == cudaSuccess) std::memcpy(out, result, kProbeResultWords * sizeof(long long));
  if (stream) cudaQuiet(cudaStreamDestroy(stream));
  if (result) cudaQuiet(cudaFreeHost(result));
  return err;
}

/// Several ranks on one GPU spin on each other, which works only when their kernels run at the same
/// time: too few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) or separate processes without MPS
/// (time-sliced) would make every barrier wait out its timeout. A one-block probe kernel of every
/// rank must meet its peers for kProbeRounds rounds within a short bound; if any rank's does not,
/// no rank launches symmetric kernels and the fallback serves.
symmarResult_t CudaBackend::probeCoScheduling() {
  long long result[kProbeResultWords] = {};
  const cudaError_t err = runProbe(coScheduleProbeKernel(), makeProbeArgs(launchContext(), nullptr), result);
  const bool met = err == cudaSuccess && result[0] == 1;
  if (err != cudaSuccess) {
    SYMMAR_WARN(kSubsysGpu, "co-scheduling probe failed to run: %s", cudaGetErrorString(err));
  } else {
    SYMMAR_INFO(kSubsysGpu, "co-scheduling probe: %d rounds with the ranks sharing GPUs %s (%lld us after the "
                "first)", kProbeRounds, met ? "met" : "did not meet", result[1] / 1000);
  }
  int bad = -1;
  SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, met, &bad));
  if (bad >= 0) {
    SYMMAR_WARN(kSubsysGpu, "the kernels of ranks sharing a GPU do not run at the same time (rank %d's probe did not "
                "meet its peers): the symmetric kernels are off for this comm and the fallback serves every call. "
                "Set CUDA_DEVICE_MAX_CONNECTIONS=32 before the first CUDA call, run the processes under MPS, or use "
                "one GPU per rank (docs/integration.md)", ctx_.commRank(bad));
    setPath(DataPath::kFallbackOnly);
  }
  noteCheck("co-scheduling probe " +
            (bad >= 0 ? "failed on rank " + std::to_string(ctx_.commRank(bad)) + " (symmetric kernels off)"
                      : std::string("met")));
  return symmarSuccess;
}

symmarResult_t CudaBackend::agreeP2pMode(P2pMode* mode) {
  std::vector<int32_t> modes;
  SYMMAR_CHECK(gatherAll<int32_t>(*ctx_.bootstrap, p2pModeFromEnv(), &modes));
  *mode = agreedP2pMode(modes);
  if (*mode == kP2pTrust && topo_.topo.link == symmarLinkPcie) {
    SYMMAR_INFO(kSubsysGpu, "SYMMAR_P2P=trust: PCIe peer access used without a check");
    noteCheck("peer access trusted (SYMMAR_P2P=trust)");
  }
  return symmarSuccess;
}

/// PCIe peer access can be claimed by the driver and still fail: an IOMMU or ACS that drops or
/// reroutes peer traffic makes NCCL hang and would make the symmetric kernels hang or read garbage.
/// Every rank stores a pattern into each peer's staging and loads each peer's pattern, and the ranks
/// agree on the outcome before any kernel relies on the link.
symmarResult_t CudaBackend::probePeerAccess(bool* broken) {
  // One seed for every rank, fresh per comm: patterns left in recycled memory by an earlier probe
  // cannot pass.
  ProbeArgs args = makeProbeArgs(launchContext(), nullptr);
  args.seed = static_cast<uint32_t>(nonceFor(ctx_.host_nonce, NonceUse::kPeerProbe));
  args.rest_ns = kP2pCheckNs;
  long long result[kProbeResultWords] = {};
  const cudaError_t err = runProbe(peerAccessProbeKernel(), args, result);
  P2pRow row{};
  for (int p = 0; p < kMaxRanks; ++p) row[static_cast<size_t>(p)] = err == cudaSuccess ? result[2 + p] : kP2pTimedOut;
  row = crossGpuOutcomes(row, onMyGpu());
  if (err != cudaSuccess) SYMMAR_WARN(kSubsysGpu, "peer-access probe failed to run: %s", cudaGetErrorString(err));
  BrokenPair b;
  SYMMAR_CHECK(agreePeerProbe(*ctx_.bootstrap, row, &b));
  *broken = b.rank >= 0;
  if (*broken) {  // named by their ranks in the comm from here on
    b.rank = ctx_.commRank(b.rank);
    b.peer = ctx_.commRank(b.peer);
  }
  noteCheck("peer-access probe " + (*broken ? "found ranks " + std::to_string(b.rank) + "-" + std::to_string(b.peer) +
                                                   " broken, staging in host memory"
                                             : std::string("passed")));
  if (*broken) {
    SYMMAR_WARN(kSubsysGpu, "%s; the kernels stage through pinned host memory instead (SYMMAR_P2P=trust skips this "
                "check)", describeBrokenPair(b).c_str());
  } else {
    SYMMAR_INFO(kSubsysGpu, "peer-access probe: every pair checked out (slowest check %lld us on this rank)",
                result[1] / 1000);
  }
  return symmarSuccess;
}

symmarResult_t CudaBackend::runStartupProbes(P2pMode p2p) {
  ProbeFacts facts;
  facts.p2p = p2p;
  facts.have_heap = have_heap_;
  facts.devices_repeat = topo_.devices_repeat;
  facts.peer_access = peersShareHeap();
  facts.host_staged = path_ == DataPath::kHostStaged;
  facts.link = topo_.topo.link;
  for (const StartupProbe probe : planStartupProbes(facts)) {
    if (probe == StartupProbe::kCoScheduling) {
      SYMMAR_CHECK(probeCoScheduling());
      continue;
    }
    bool broken = false;
    SYMMAR_CHECK(probePeerAccess(&broken));
    if (!broken) continue;
    // The same verdict on every rank: rebuild the heap in host memory.
    heap_.release();
    setPath(DataPath::kHostStaged);
    SYMMAR_CHECK(buildHeap());
    const symmarResult_t local = initPad();
    int bad = -1;
    SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, local == symmarSuccess, &bad));
    if (bad >= 0) {
      return local != symmarSuccess ? local
                                    : fail(symmarCudaError, "rank %d failed to initialise", ctx_.commRank(bad));
    }
  }
  return symmarSuccess;
}

std::vector<bool> CudaBackend::onMyGpu() const {
  const RankInfo& self = topo_.ranks[static_cast<size_t>(ctx_.rank)];
  std::vector<bool> same;
  for (const RankInfo& r : topo_.ranks) same.push_back(std::memcmp(r.uuid, self.uuid, sizeof(self.uuid)) == 0);
  return same;
}

}  // namespace gpu
}  // namespace symmar

// Co-scheduling probe, run once when a comm is created with several ranks on one GPU: one block per
// rank meets every peer for a number of rounds through the probe words of the signal pads. Kernels
// that run at the same time meet in about a microsecond a round; kernels that the GPU serialises
// (too few hardware queues, separate processes time-sliced without MPS) cannot meet at all, or only
// one time slice a round. The allreduce kernels spin on their peers in the same way, so a comm
// whose probe fails must not launch them (the host then serves every call from the fallback).
#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

struct ProbeShared {
  int failed[kMaxRanks];  ///< per peer thread: its wait passed the bound
  long long rest_start;   ///< when the first round ended
};

__device__ __forceinline__ uint32_t* probeWord(char* base, size_t pad_off, int from) {
  return reinterpret_cast<uint32_t*>(base + pad_off + padProbeOffset(from));
}

__global__ void __launch_bounds__(kThreads) coScheduleProbe(ProbeArgs a) {
  SYMMAR_BLOCK_SHARED(ProbeShared, sh);
  const int t = threadIdx.x;
  const bool peer_thread = t < a.world && t != a.rank;
  if (t < kMaxRanks) sh.failed[t] = 0;
  bool failed = false;
  for (int round = 1; round <= a.rounds && !failed; ++round) {
    __syncthreads();
    if (peer_thread) {
      ptx::st_release_sys(probeWord(a.base[t], a.pad_off, a.rank), static_cast<uint32_t>(round));
      const uint32_t* in = probeWord(a.base[a.rank], a.pad_off, t);
      // The first round absorbs the launch skew between ranks; the later ones share one short bound.
      const long long from = round == 1 ? ptx::globaltimer() : sh.rest_start;
      const long long bound = round == 1 ? a.first_ns : a.rest_ns;
      while (!sched::epochReached(ptx::ld_acquire_sys(in), static_cast<uint32_t>(round))) {
        if (ptx::globaltimer() - from > bound) {
          sh.failed[t] = 1;
          break;
        }
      }
    }
    __syncthreads();
    if (round == 1 && t == 0) sh.rest_start = ptx::globaltimer();
    for (int p = 0; p < a.world; ++p) failed = failed || sh.failed[p] != 0;
  }
  __syncthreads();
  if (t == 0) {
    a.result[1] = ptx::globaltimer() - sh.rest_start;
    a.result[0] = failed ? 0 : 1;
  }
}

}  // namespace

const void* coScheduleProbeKernel() { return reinterpret_cast<const void*>(&coScheduleProbe); }

}  // namespace gpu
}  // namespace symmar

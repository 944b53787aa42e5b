// Start-up probes, each one block per rank, run once when a comm is created:
//  - co-scheduling (several ranks on one GPU): every rank meets every peer for a number of rounds
//    through the probe words of the signal pads. Kernels that run at the same time meet in about a
//    microsecond a round; kernels that the GPU serialises (too few hardware queues, separate
//    processes time-sliced without MPS) cannot meet at all, or only one time slice a round.
//  - peer access (GPUs linked by PCIe): every rank stores a pattern into each peer's staging and
//    loads each peer's own pattern from it, with the accesses the kernels use (16-byte stores and
//    loads, a release flag), and counts what did not arrive: P2P that the IOMMU or ACS drops or
//    reroutes shows up here instead of as a wrong sum or a hang.
// The allreduce kernels rely on both, so a comm whose probe fails must not launch them (the host
// then serves every call from the fallback).
#include <cstdint>

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

__global__ void __launch_bounds__(kThreads) coScheduleProbe(const SYMMAR_GRID_CONSTANT ProbeArgs a) {
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

/// The 16 bytes v of the pattern `writer` leaves for `reader` (reader -1: its own region).
__device__ __forceinline__ uint4 patternVec(uint32_t seed, int writer, int reader, size_t v) {
  uint32_t w[4];
  for (int k = 0; k < 4; ++k) {
    uint32_t x = seed ^ (static_cast<uint32_t>(writer + 1) * 0x9e3779b9u) ^ (static_cast<uint32_t>(reader + 2) * 0x85ebca6bu) ^
                 static_cast<uint32_t>(v * 4 + static_cast<size_t>(k)) * 0xc2b2ae35u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    w[k] = x ^ (x >> 13);
  }
  uint4 out;
  out.x = w[0];
  out.y = w[1];
  out.z = w[2];
  out.w = w[3];
  return out;
}

__device__ __forceinline__ uint4* region(char* base, size_t staging_off, int index) {
  return reinterpret_cast<uint4*>(base + staging_off + static_cast<size_t>(index) * kP2pProbeBytes);
}

__device__ __forceinline__ long long countWrong(const uint4* at, uint32_t seed, int writer, int reader) {
  long long wrong = 0;
  for (size_t v = 0; v < kP2pProbeBytes / sizeof(uint4); ++v) {
    const uint4 got = ptx::ld_vec(at + v);
    const uint4 want = patternVec(seed, writer, reader, v);
    wrong += (got.x != want.x) + (got.y != want.y) + (got.z != want.z) + (got.w != want.w);
  }
  return wrong;
}

struct PeerAccessShared {
  long long outcome[kMaxRanks];
  long long checks_ns[kMaxRanks];
};

__global__ void __launch_bounds__(kThreads) peerAccessProbe(const SYMMAR_GRID_CONSTANT ProbeArgs a) {
  SYMMAR_BLOCK_SHARED(PeerAccessShared, sh);
  const int t = threadIdx.x;
  constexpr size_t kVecs = kP2pProbeBytes / sizeof(uint4);
  uint4* own = region(a.base[a.rank], a.staging_off, 0);
  for (size_t v = static_cast<size_t>(t); v < kVecs; v += kThreads) own[v] = patternVec(a.seed, a.rank, -1, v);
  if (t < kMaxRanks) sh.outcome[t] = sh.checks_ns[t] = 0;
  __syncthreads();  // the own pattern precedes every flag below
  if (t < a.world && t != a.rank) {
    // Thread t serves peer t: stores into its region 1 + rank, then raises the flag there.
    uint4* there = region(a.base[t], a.staging_off, 1 + a.rank);
    for (size_t v = 0; v < kVecs; ++v) there[v] = patternVec(a.seed, a.rank, t, v);
    ptx::st_release_sys(reinterpret_cast<uint32_t*>(a.base[t] + a.pad_off + padP2pOffset(a.rank)), 1u);
    const uint32_t* flag = reinterpret_cast<const uint32_t*>(a.base[a.rank] + a.pad_off + padP2pOffset(t));
    const long long start = ptx::globaltimer();
    bool arrived = true;
    while (ptx::ld_acquire_sys(flag) == 0) {
      if (ptx::globaltimer() - start > a.first_ns) {
        arrived = false;
        break;
      }
    }
    if (!arrived) {
      sh.outcome[t] = kP2pTimedOut;
    } else {
      const long long t0 = ptx::globaltimer();
      // Loads across the link (peer t's own pattern), then what peer t stored here.
      const long long wrong = countWrong(region(a.base[t], a.staging_off, 0), a.seed, t, -1) +
                              countWrong(region(a.base[a.rank], a.staging_off, 1 + t), a.seed, t, a.rank);
      sh.checks_ns[t] = ptx::globaltimer() - t0;
      sh.outcome[t] = wrong != 0 ? wrong : sh.checks_ns[t] > a.rest_ns ? kP2pTooSlow : 0;
    }
  }
  __syncthreads();
  if (t == 0) {
    bool ok = true;
    long long slowest = 0;
    for (int p = 0; p < kMaxRanks; ++p) {
      a.result[2 + p] = sh.outcome[p];
      ok = ok && sh.outcome[p] == 0;
      slowest = sh.checks_ns[p] > slowest ? sh.checks_ns[p] : slowest;
    }
    a.result[1] = slowest;
    a.result[0] = ok ? 1 : 0;
  }
}

}  // namespace

const void* coScheduleProbeKernel() { return reinterpret_cast<const void*>(&coScheduleProbe); }
const void* peerAccessProbeKernel() { return reinterpret_cast<const void*>(&peerAccessProbe); }

}  // namespace gpu
}  // namespace symmar

#include "gpu/gpu_entry.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/names.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/driver.h"
#include "gpu/hier_backend.h"
#include "gpu/peer_probe.h"
#include "gpu/startup_policy.h"

namespace symmar {
namespace gpu {
namespace {

// The kernels' smallest staging buffer: one chunk must cover a useful share of a one-shot message.
constexpr size_t kMinStagingBytes = size_t{64} << 10;

}  // namespace

CudaBackend::~CudaBackend() {
  if (device_ < 0) return;
  DeviceGuard guard(device_);
  // Kernels of this comm may still read peer mappings; every wait in them is bounded.
  cudaDeviceSynchronize();
  // Read after the synchronisation: a kernel still in flight may have failed the comm meanwhile.
  const bool failed = comm_failed_ || (status_host_ && status_host_[kStatusCode] != 0);
  if (failed) nccl_.markFailed();
  heap_.release(failed);  // failed: peers may still be inside kernels on this rank's memory
  host_heap_.release();
  for (void* p : plain_allocs_) cudaQuiet(cudaFree(p));
  if (state_) cudaQuiet(cudaFree(state_));
  if (status_host_) cudaQuiet(cudaFreeHost(status_host_));
}

symmarResult_t CudaBackend::resolveSettings() {
  const SymmarSettings& s = ctx_.settings;
  if (s.device == SYMMAR_DEVICE_AUTO) {
    SYMMAR_CUDA_TRY(cudaGetDevice(&device_));
  } else if (s.device < 0) {
    return fail(symmarInvalidArgument, "device %d is not a CUDA device", s.device);
  } else {
    device_ = s.device;
  }
  // Every size and the start epoch arrive agreed across ranks (comm_init.cc); the floor and the
  // rounding below are the same on every rank, so the layouts stay equal.
  timeout_ms_ = s.timeout_ms;
  pdl_ = envNumber("SYMMAR_PDL") != 0;  // on sm_90+ only: see init
  epoch_start_ = s.epoch_start;
  const size_t staging = std::max(kMinStagingBytes, s.staging_bytes / 256 * 256);
  const size_t heap = s.heap_bytes;
  layout_ = makeLayout(staging, heap, ctx_.nranks);
  return symmarSuccess;
}

/// Blocks per kernel: every rank on a GPU spins on its peers, so all their grids must be resident at
/// once (coResidentBlocks). Same on all ranks.
symmarResult_t CudaBackend::initBlocks() {
  int sms = 0;
  SYMMAR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  // Every kernel that spins on peers, with its block size; the fused ones meet in the same barriers.
  std::vector<int> per_sm;  // resident blocks per multiprocessor of every kernel that answered
  bool kernels_ok = true;
  for (const auto& [k, threads] : everyKernel()) {
    if (!k) continue;
    int n = 0;
    const cudaError_t err = cudaQuiet(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0));
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
        err == cudaErrorUnsupportedPtxVersion) {
      // Built without code for this GPU (e.g. an A100 or L40S with the default architectures):
      // no symmetric kernels here, the fallback serves; not a reason to fail the comm.
      kernels_ok = false;
      continue;
    }
    SYMMAR_CUDA_TRY(err);
    per_sm.push_back(n);
    // Loaded now, while no kernel of this comm runs: a lazy load at a first launch may wait for the
    // kernels already running, and those may be peers' spinning for this rank (driver.h).
    const cudaError_t loaded = loadKernelNow(k);
    if (loaded != cudaSuccess) {
      SYMMAR_WARN(kSubsysGpu, "a kernel could not be loaded ahead of its first launch (%s); it loads then",
                  cudaGetErrorString(loaded));
    }
  }
  // Every rank must reach the same answer, or some would launch kernels their peers never meet.
  int bad = -1;
  SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, kernels_ok, &bad));
  kernel_images_ = bad < 0;
  if (bad >= 0) {
    SYMMAR_INFO(kSubsysGpu, "rank %d's GPU has no kernel image in this build (compute capability %d.%d here): the "
                "symmetric kernels are off for this comm and the fallback serves every call (rebuild with its "
                "architecture in CMAKE_CUDA_ARCHITECTURES)", ctx_.commRank(bad), topo_.topo.cc_major,
                topo_.topo.cc_minor);
    setPath(DataPath::kFallbackOnly);
  }
  const int grids = topo_.ranks_on_my_device * residentGridsPerRank(pdl_, topo_.devices_repeat);
  const int cap = coResidentBlocks(sms, per_sm, grids, sched::kMaxBlocks);
  const GridLimits mine{cap, static_cast<int>(envNumber("SYMMAR_FUSED_ROW_PARTS"))};
  std::vector<int32_t> words;
  SYMMAR_CHECK(gatherAll<int32_t>(*ctx_.bootstrap, gridLimitsWord(mine), &words));
  const GridLimits agreed = agreedGridLimits(words);
  nblocks_ = agreed.blocks;
  row_parts_ = agreed.row_parts;
  timeout_ns_ = static_cast<long long>(timeout_ms_) * 1000000;  // spins count %globaltimer nanoseconds
  return symmarSuccess;
}

/// Device epochs, pads and the status words. Every flag starts at the start epoch, then a
/// bootstrap agreement makes sure no rank runs a kernel before all pads are initialised.
symmarResult_t CudaBackend::initDeviceState() {
  SYMMAR_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&status_host_), kStatusWords * sizeof(int),
                                cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(status_host_, 0, kStatusWords * sizeof(int));
  SYMMAR_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&status_dev_), status_host_, 0));
  SYMMAR_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&state_), sizeof(DeviceState)));
  DeviceState init{};
  for (uint32_t& e : init.start_epoch) e = epoch_start_;
  init.end_epoch = epoch_start_;
  init.done_count = 0;
  init.lamport_calls = epoch_start_;  // SYMMAR_EPOCH_START reaches lamport's wrap as well
  init.lamport_buf = 0;
  SYMMAR_CUDA_TRY(cudaMemcpy(state_, &init, sizeof(init), cudaMemcpyHostToDevice));
  return initPad();
}

void CudaBackend::setPath(DataPath path) {
  path_ = path;
  if (path == DataPath::kFallbackOnly) {
    topo_.topo.link = symmarLinkUnknown;  // the planner then offers only the fallback
    topo_.topo.multicast = 0;
  } else if (path == DataPath::kHostStaged) {
    topo_.topo.link = symmarLinkPcieNoP2P;
    topo_.topo.multicast = 0;
    // No user heap in host memory: symmarMemAlloc hands out device memory, and inputs are staged.
    layout_ = makeLayout(layout_.staging_bytes, 0, ctx_.nranks);
  }
}

symmarResult_t CudaBackend::init(BackendFacts* facts) {
  const char* why = "";
  if (!driverApi(&why)) return fail(symmarCudaError, "the CUDA backend cannot start: %s", why);
  SYMMAR_CHECK(resolveSettings());
  SYMMAR_CUDA_TRY(cudaSetDevice(device_));
  SYMMAR_CUDA_TRY(cudaFree(nullptr));  // creates the primary context the driver calls use
  SYMMAR_CHECK(probeTopology(ctx_, device_, &topo_));
  path_ = topo_.peer_access ? DataPath::kPeer : topo_.host_staged ? DataPath::kHostStaged : DataPath::kFallbackOnly;
  pdl_ = usePdl(pdl_, topo_.topo.cc_major);
  if (pdl_ && topo_.devices_repeat) {
    SYMMAR_INFO(kSubsysGpu, "programmatic dependent launch on a shared GPU: the block cap counts two grids per rank "
                "(a rank's next kernel may be resident early)");
    noteCheck("block cap halved for programmatic dependent launch (ranks share a GPU)");
  }
  SYMMAR_CHECK(initBlocks());

  // The planner reads fallbacks(): it must be the same on every rank.
  const bool nccl = wantOwnNccl(host_stage_, topo_.devices_repeat) && nccl_.load();
  int bad = -1;
  SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, nccl, &bad));
  nccl_ok_ = bad < 0;
  if (nccl_ok_) {
    const symmarResult_t made = nccl_.create(ctx_);
    SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, made == symmarSuccess, &bad));
    if (bad >= 0) {
      SYMMAR_WARN(kSubsysGpu, "NCCL fallback off for this comm: rank %d could not create its NCCL communicator (%s)",
                  ctx_.commRank(bad), made == symmarSuccess ? "see that rank's log" : threadLastError().c_str());
      nccl_ok_ = false;
    }
  }

  have_heap_ = topo_.all_local;
  // Peer access is refused (SYMMAR_P2P=off, any link) or, over PCIe, checked before the kernels
  // rely on it (probe).
  P2pMode p2p = kP2pTrust;
  if (have_heap_ && peersShareHeap()) SYMMAR_CHECK(agreeP2pMode(&p2p));
  if (p2p == kP2pOff) {
    SYMMAR_INFO(kSubsysGpu, "SYMMAR_P2P=off: the kernels stage through pinned host memory");
    noteCheck("peer access off (SYMMAR_P2P=off), staging in host memory");
  }
  if (p2p != kP2pOff && path_ == DataPath::kHostStaged) {
    noteCheck("no peer access between the GPUs, staging in host memory");
  }
  if (p2p == kP2pOff || path_ == DataPath::kHostStaged) setPath(DataPath::kHostStaged);
  if (have_heap_) SYMMAR_CHECK(buildHeap());

  symmarResult_t local = initDeviceState();
  SYMMAR_CHECK(agreeAll(*ctx_.bootstrap, local == symmarSuccess, &bad));
  if (bad >= 0) {
    return local != symmarSuccess ? local : fail(symmarCudaError, "rank %d failed to initialise", ctx_.commRank(bad));
  }
  SYMMAR_CHECK(runStartupProbes(p2p));
  facts->topo = topo_.topo;
  facts->placement = ctx_.placement;  // several hosts: NCCL serves (its own hierarchy)
  facts->staging_bytes = layout_.staging_bytes;
  facts->checks = checks_;
  facts->fused_rows_cap = static_cast<size_t>(nblocks_);  // makeAddRmsNormArgs: a block per row up to it
  SYMMAR_INFO(kSubsysInit,
              "CUDA backend ready: device %d, %d blocks x %d threads (a fused row over up to %d), staging %zu "
              "bytes, nccl %s",
              device_, nblocks_, kThreads, row_parts_, layout_.staging_bytes,
              host_stage_ ? "from the whole comm" : nccl_ok_ ? "yes" : "no");
  return symmarSuccess;
}

LaunchContext CudaBackend::launchContext() const {
  LaunchContext ctx;
  ctx.rank = ctx_.rank;
  ctx.world = ctx_.nranks;
  ctx.bases = bases_.data();
  ctx.mc_base = heap_.multicastBase();
  ctx.layout = layout_;
  ctx.have_heap = have_heap_;
  ctx.arena = &arena_;
  ctx.state = state_;
  ctx.status = status_dev_;
  ctx.timeout_ns = timeout_ns_;
  ctx.max_blocks = nblocks_;
  ctx.max_row_parts = row_parts_;
  return ctx;
}

symmarResult_t CudaBackend::allReduce(const AllReduceCall& c) {
  SYMMAR_CHECK(asyncError());
  if (c.count == 0) return symmarSuccess;
  DeviceGuard guard(device_);
  cudaStream_t s = static_cast<cudaStream_t>(c.stream);
  if (c.algo == symmarAlgoNccl) {
    if (!nccl_ok_) return fail(symmarUnsupported, "the NCCL fallback is not available on this comm");
    return nccl_.allReduce(ctx_, c.send, c.recv, c.count, c.dtype, c.op, s);
  }
  const void* kernel = kernelOf(c.algo, c.dtype, c.op, heap_.multicast());
  if (!kernel || !kernelsRun()) {
    return fail(symmarUnsupported, "algorithm %s cannot serve %s %s on this comm", symmarAlgoName(c.algo),
                dtypeName(c.dtype), opName(c.op));
  }
  const LaunchContext lc = launchContext();
  KernelArgs a = makeKernelArgs(lc, c.send, c.recv, c.count, c.dtype, c.algo, callSignature(c));
  return launch(kernel, gridFor(lc, c.count, c.dtype, c.algo), threadsFor(c.algo), &a, s);
}

symmarResult_t CudaBackend::scatterGather(const ScatterGatherCall& c) {
  SYMMAR_CHECK(asyncError());
  if (c.count == 0) return symmarSuccess;
  DeviceGuard guard(device_);
  if (c.algo == symmarAlgoNccl) {
    if (!nccl_ok_) return fail(symmarUnsupported, "the NCCL fallback is not available on this comm");
    return nccl_.scatterGather(ctx_, c);
  }
  const void* kernel = scatterGatherKernelOf(c.algo, c.coll, c.dtype, c.op, launchContext().mc_base != nullptr);
  if (!kernel || !kernelsRun()) {
    return fail(symmarUnsupported, "algorithm %s cannot serve this %s of %s on this comm", symmarAlgoName(c.algo),
                collectiveName(c.coll), dtypeName(c.dtype));
  }
  int grid = 1;
  KernelArgs a = makeScatterGatherArgs(launchContext(), c, &grid);
  return launch(kernel, grid, kThreads, &a, static_cast<cudaStream_t>(c.stream));
}

symmarResult_t CudaBackend::launch(const void* kernel, int grid, int threads, KernelArgs* args, cudaStream_t stream) {
  void* params[] = {args};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.stream = stream;
  // Programmatic dependent launch: the kernel may start while the one producing its input ends;
  // every kernel waits (griddepcontrol.wait) before its first read of input or state.
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  if (pdl_) {
    cfg.attrs = &pdl;
    cfg.numAttrs = 1;
  }
  SYMMAR_CUDA_TRY(cudaLaunchKernelExC(&cfg, kernel, params));
  return symmarSuccess;
}

symmarResult_t CudaBackend::asyncError() {
  const volatile int* st = status_host_;
  if (!st || st[kStatusCode] == 0) return symmarSuccess;
  nccl_.markFailed();
  const auto code = static_cast<symmarResult_t>(st[kStatusCode]);
  // The kernels count the context's ranks.
  const int self = ctx_.commRank(ctx_.rank), peer = ctx_.commRank(st[kStatusPeer]);
  const int block = st[kStatusBlock];
  switch (st[kStatusReason]) {
    case kReasonBadInputOffset:
      return fail(code, "rank %d: rank %d published an input offset outside its heap (block %d); the comm is failed",
                  self, peer, block);
    case kReasonCallMismatch:
      return fail(code, "rank %d: rank %d's call differed in collective, count, dtype, op, algorithm or order "
                  "(every rank must make the same calls in the same order); the comm is failed", self, peer);
    case kReasonPeerFailed:
      return fail(code, "rank %d: rank %d had failed earlier (its kernels gave up); the comm is failed", self, peer);
    case kReasonRowGroupTimeout:
      return fail(code, "rank %d: block %d of a fused call waited more than %d ms for the other blocks of its row "
                  "(this rank's own blocks, which never ran beside it); the comm is failed", self, block, timeout_ms_);
    default:
      return fail(code, "rank %d: a device barrier waited more than %d ms for rank %d (block %d); the comm is failed",
                  self, timeout_ms_, peer, block);
  }
}

symmarResult_t CudaBackend::memAlloc(size_t bytes, void** ptr) {
  Bootstrap& bs = *ctx_.bootstrap;
  if (!deviceHeapServes()) {  // no shared device heap: plain device memory (never read by peers)
    DeviceGuard guard(device_);
    SYMMAR_CUDA_TRY(cudaMalloc(ptr, bytes));
    plain_allocs_.insert(*ptr);
    return symmarSuccess;
  }
  size_t off = 0;
  const bool ok = arena_.allocate(bytes, &off);
  struct AllocOutcome {
    uint64_t ok;
    uint64_t off;
  };
  std::vector<AllocOutcome> all;
  SYMMAR_CHECK(gatherAll(bs, AllocOutcome{ok ? 1u : 0u, off}, &all));
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].ok || all[r].off != all[0].off) {
      if (ok) arena_.release(off);
      if (!all[r].ok) {
        return fail(symmarOutOfMemory, "symmarMemAlloc(%zu): rank %d's symmetric heap (%zu bytes) is full", bytes,
                    ctx_.commRank(static_cast<int>(r)), layout_.heap_bytes);
      }
      return fail(symmarInvalidUsage, "symmarMemAlloc(%zu): offsets differ across ranks (rank %d), so the ranks' "
                  "allocation sequences differ", bytes, ctx_.commRank(static_cast<int>(r)));
    }
  }
  *ptr = heap_.base(ctx_.rank) + layout_.heap_off + off;
  return symmarSuccess;
}

symmarResult_t CudaBackend::memFree(void* ptr) {
  if (!deviceHeapServes()) {
    if (plain_allocs_.erase(ptr) != 1) return fail(symmarInvalidArgument, "pointer was not allocated by symmarMemAlloc");
    DeviceGuard guard(device_);
    SYMMAR_CUDA_TRY(cudaFree(ptr));
    return symmarSuccess;
  }
  const char* heap = heap_.base(ctx_.rank) + layout_.heap_off;
  const char* p = static_cast<const char*>(ptr);
  const bool mine = p >= heap && p < heap + layout_.heap_bytes && arena_.release(static_cast<size_t>(p - heap));
  std::vector<uint64_t> all;
  SYMMAR_CHECK(gatherAll<uint64_t>(*ctx_.bootstrap, mine ? static_cast<uint64_t>(p - heap) : ~0ull, &all));
  if (!mine) return fail(symmarInvalidArgument, "pointer %p was not allocated by symmarMemAlloc on this comm", ptr);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[ctx_.rank]) {
      return fail(symmarInvalidUsage, "symmarMemFree: rank %d freed a different buffer than rank %d",
                  ctx_.commRank(static_cast<int>(r)), ctx_.commRank(ctx_.rank));
    }
  }
  return symmarSuccess;
}

}  // namespace gpu

bool cudaUsable(int* device) {
  *device = -1;
  if (!gpu::driverApi()) return false;
  int count = 0;
  if (gpu::cudaQuiet(cudaGetDeviceCount(&count)) != cudaSuccess || count == 0) return false;
  int d = 0;
  if (gpu::cudaQuiet(cudaGetDevice(&d)) != cudaSuccess) return false;
  *device = d;
  return true;
}

symmarResult_t ncclGroupCall(bool start, bool* called) { return gpu::NcclFallback::group(start, called); }

symmarResult_t createCudaBackend(const BackendContext& ctx, BackendFacts* facts, std::unique_ptr<Backend>* out) {
  if (ctx.nranks > gpu::kMaxRanks) {
    SYMMAR_INFO(kSubsysInit, "%d ranks: the symmetric kernels serve at most %d, NCCL serves this comm", ctx.nranks,
                gpu::kMaxRanks);
  }
  // Across two hosts of equal size: the kernels within each host, NCCL between (hier_backend.h).
  const HostPlacement& placement = ctx.placement;
  std::string why;
  if (gpu::gpuHierarchyApplies(placement, &why)) {
    return gpu::createHierarchicalCudaBackend(ctx, facts, out);
  }
  if (placement.hosts > 1) {
    SYMMAR_INFO(kSubsysInit, "ranks span %d hosts: NCCL serves this comm (%s)", placement.hosts, why.c_str());
  }
  auto backend = std::make_unique<gpu::CudaBackend>(ctx);
  SYMMAR_CHECK(backend->init(facts));
  *out = std::move(backend);
  return symmarSuccess;
}

}  // namespace symmar

#include "host/host_backend.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/host_layout.h"
#include "core/bootstrap_api.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/names.h"
#include "core/random.h"
#include "host/cross_memory.h"

namespace symmar {
namespace {

// Smallest chunk of a comm spanning hosts: each chunk pays an inter-host exchange. Measured on 2
// simulated hosts x 2 ranks (docs/performance/across-hosts.md): 256 KiB chunks were behind MPI_Allreduce at
// 1-4 MiB, 4 MiB chunks at 4 MiB, 1 MiB chunks ahead at both. Applies where a smaller chunk is set.
constexpr size_t kInterHostChunkBytes = size_t{1} << 20;

// Whether any rank of the heap is another process (ranks may be threads of one).
bool hasPeerProcesses(const ShmHeap& heap, int world) {
  const int self = getpid();
  for (int p = 0; p < world; ++p) {
    if (heap.header(p)->pid != self) return true;  // only picks whether to ask Yama: any value is harmless
  }
  return false;
}

// Says at INFO what letPeersRead did where it had something to do.
void logPeerReadPermission(PeerReadPermission permission) {
  switch (permission) {
    case PeerReadPermission::kNotNeeded: return;
    case PeerReadPermission::kGranted:
      SYMMAR_INFO(kSubsysInit, "host: Yama ptrace_scope is 1; this process now lets processes of its user read "
                  "its memory (prctl PR_SET_PTRACER_ANY), so that peers can copy all-gather send buffers from it "
                  "(SYMMAR_HOST_CMA=0 keeps Yama's rule and stages them)");
      return;
    case PeerReadPermission::kRefused:
      SYMMAR_INFO(kSubsysInit, "host: Yama ptrace_scope is 1 and prctl(PR_SET_PTRACER) failed (%s): peers cannot "
                  "read this process, all-gathers stage their send buffers", strerror(errno));
      return;
    case PeerReadPermission::kNotGrantable:
      SYMMAR_INFO(kSubsysInit, "host: Yama ptrace_scope is above 1: peers cannot read this process, all-gathers "
                  "stage their send buffers");
      return;
  }
}

}  // namespace

HostBackend::HostBackend(const BackendContext& ctx)
    : ctx_(ctx), placement_(ctx.placement), rank_(ctx.placement.local_rank), world_(ctx.placement.local_size) {}

HostBackend::~HostBackend() {
  if (sync_) sync_->leave();  // peers still waiting on this rank stop now instead of at their timeout
}

void HostBackend::noteCommFailed() {
  if (sync_) sync_->noteCommFailed();
}

symmarResult_t HostBackend::create(const BackendContext& ctx, BackendFacts* facts, std::unique_ptr<Backend>* out) {
  Bootstrap& boot = *ctx.bootstrap;
  const HostPlacement& placement = ctx.placement;
  const std::vector<int>& host_ranks = ctx.host_ranks;
  const bool local = placement.hosts == 1;
  std::unique_ptr<HostBackend> b(new HostBackend(ctx));

  facts->topo.cc_major = 0;
  facts->topo.cc_minor = 0;
  // Across hosts the link stays unknown (fallback only) until an inter-host engine is set.
  facts->topo.link = local ? symmarLinkHostMemory : symmarLinkUnknown;
  facts->placement = placement;
  facts->topo.world_size = ctx.nranks;
  facts->topo.multicast = 0;
  // The sizes and the start epoch arrive agreed across ranks (comm_init.cc).
  facts->staging_bytes = ctx.settings.staging_bytes;
  b->chunk_cap_ = ctx.settings.host_chunk_bytes;
  // Across hosts every chunk pays a round trip through the inter-host engine: fewer, larger ones.
  if (!local) b->chunk_cap_ = std::max(b->chunk_cap_, kInterHostChunkBytes);
  b->srcs_.resize(ctx.nranks);
  // Busy polling pays only while every rank has a core (pretended hosts share one machine).
  const unsigned cores = std::thread::hardware_concurrency();
  const bool oversubscribed = cores == 0 || static_cast<unsigned>(ctx.machine_ranks) > cores;
  const int64_t spin = oversubscribed ? 16 : 4096;
  const int spin_limit = static_cast<int>(envNumber("SYMMAR_HOST_SPIN", spin));

  if (!placement.uniform) {
    SYMMAR_INFO(kSubsysInit, "ranks span %d hosts with different numbers of ranks (this host %d): no hierarchical "
                "path, the fallback serves every call", placement.hosts, placement.local_size);
  } else {
    Bootstrap* host_boot = &boot;
    if (!local) {
      SYMMAR_CHECK(connectHost(boot, placement, host_ranks, ctx.settings.timeout_ms, &b->host_bootstrap_));
      host_boot = b->host_bootstrap_.get();
      SYMMAR_INFO(kSubsysInit, "ranks span %d hosts of %d: shared memory within each host, the inter-host stage "
                  "once an engine is set", placement.hosts, placement.local_size);
    }
    const size_t heap_bytes = ctx.settings.heap_bytes;
    auto heap = std::make_unique<ShmHeap>();
    SYMMAR_CHECK(heap->create(*host_boot, nonceFor(ctx.host_nonce, NonceUse::kHostHeap), facts->staging_bytes,
                              heap_bytes, ctx.settings.epoch_start, ctx.settings.timeout_ms));
    b->heap_ = std::move(heap);  // only a fully mapped heap: the destructor writes through it
    // The start epoch doubles as the first call number, so that a test can start near either wrap.
    b->sync_ = std::make_unique<ShmSync>(b->heap_.get(), b->rank_, b->world_, host_ranks, ctx.settings.timeout_ms,
                                         spin_limit, ctx.settings.epoch_start);
    b->arena_ = SymmetricArena(heap_bytes);
    // Every rank reads its peers' processes, or none does: an address a rank publishes needs
    // readers on every peer. First each rank whose peers are other processes lets them read it
    // where Yama would refuse them; the agreement after that keeps every probe after every
    // rank's permission.
    const bool wants_reads = envNumber("SYMMAR_HOST_CMA", 1) != 0;
    if (wants_reads && hasPeerProcesses(*b->heap_, b->world_)) logPeerReadPermission(letPeersRead(yamaPtraceScope(), setPtracerAny));
    int first_failed = -1;
    SYMMAR_CHECK(agreeAll(*host_boot, wants_reads, &first_failed));
    const bool readable =
        first_failed < 0 && crossMemoryWorks(*b->heap_, b->rank_, b->world_, &b->peer_pids_);
    SYMMAR_CHECK(agreeAll(*host_boot, readable, &first_failed));
    b->cross_memory_ = first_failed < 0;
    // The staging ring (sched::stagingRingShift) pays where each rank has a core: ranks that share
    // one share its cache, and there it gained nothing (3-4 ranks on 2 cores: two-shot 0-14%
    // slower, docs/performance/host-allreduce.md). A staged slice is read at the shift its writer used, so every
    // rank takes the ring or none does.
    const bool ring = envNumber("SYMMAR_HOST_STAGING_RING", oversubscribed ? 0 : 1) != 0;
    // The ring spreads small calls over 8 MiB of each rank's staging (both halves): map it now,
    // or the first calls in each slot fault their pages in (a 16 KiB two-shot then took 21 us,
    // not 2, over a short run). The first touch of a page places it on the toucher's memory node:
    // each rank maps its own ring before the agreement and its peers' only after it, so that on a
    // machine of several nodes a rank's staging lies on the node of the rank that writes it, as the
    // rest of its staging (first written by its owner) does, whichever rank is faster.
    if (ring) b->heap_->mapStagingPages(sched::kStagingRingBytes, b->rank_);
    SYMMAR_CHECK(agreeAll(*host_boot, ring, &first_failed));
    b->staging_ring_ = first_failed < 0;
    if (b->staging_ring_) {
      for (int r = 0; r < b->world_; ++r) {
        if (r != b->rank_) b->heap_->mapStagingPages(sched::kStagingRingBytes, r);
      }
    }
    // Each rank's own choice: both kinds of store put the same bytes in staging.
    b->staging_writes_ = StagingWrites(static_cast<StagingWrites::Mode>(envNumber("SYMMAR_HOST_STREAM", 2)));
    // Each rank's own choice too: every element is reduced in rank order whichever thread takes it.
    const int threads = static_cast<int>(envNumber("SYMMAR_HOST_THREADS"));
    if (threads > 1 && local) SYMMAR_CHECK(b->setHostThreads(threads, nullptr, nullptr));
    SYMMAR_INFO(kSubsysInit, "host: all-gather reads peers' send buffers %s",
                b->cross_memory_ ? "from their processes (cross-memory attach)"
                                 : "from staging (a rank cannot read its peers' processes, or SYMMAR_HOST_CMA=0)");
  }
  *out = std::move(b);
  return symmarSuccess;
}

symmarResult_t HostBackend::peerInput(int p, uint64_t word, size_t bytes, size_t elem, const char** input) {
  SYMMAR_CHECK(checkPeerInputOffset(p, word, bytes, elem));
  *input = word == sched::kStagedInput ? nullptr : heap_->userBase(p) + word;
  return symmarSuccess;
}

symmarResult_t HostBackend::readPeerProcess(int p, char* dst, uint64_t remote, size_t bytes) {
  // In parts, each its own system call; a part records its errno (the parts' threads have no say in
  // this thread's error text).
  std::atomic<int> failed{0};
  inParts(bytes, 1, [&](int, size_t b, size_t n) {
    if (!crossMemoryRead(peer_pids_[static_cast<size_t>(p)], dst + b, remote + b, n)) failed = errno ? errno : EIO;
  });
  if (failed == 0) return symmarSuccess;
  const int err = failed;
  return sync_->failCall(fail(symmarPeerFailure, "rank %d's send buffer (%zu bytes at 0x%llx) could not be read from "
                              "its process: %s", commRank(p), bytes, static_cast<unsigned long long>(remote),
                              strerror(err)));
}

symmarResult_t HostBackend::checkPeerInputOffset(int peer, uint64_t input_offset, size_t input_bytes, size_t elem) {
  const uint64_t heap = heap_->heapBytes();
  const uint64_t bytes = input_bytes;
  if (input_offset == sched::kStagedInput ||
      (input_offset <= heap && bytes <= heap - input_offset && input_offset % elem == 0))
    return symmarSuccess;
  return sync_->failCall(fail(symmarPeerFailure,
                       "rank %d published an input offset (offset %llu, %llu bytes) outside its %llu-byte heap",
                       commRank(peer),
                       static_cast<unsigned long long>(input_offset), static_cast<unsigned long long>(bytes),
                       static_cast<unsigned long long>(heap)));
}

uint32_t HostBackend::barrierEpoch() const { return sync_ ? sync_->epoch() : 0; }

uint64_t HostBackend::symmetricOffset(const void* p, size_t bytes) const {
  const char* base = heap_->userBase(rank_);
  const char* c = static_cast<const char*>(p);
  if (c < base || static_cast<size_t>(c - base) >= arena_.capacity()) return sched::kStagedInput;
  return arena_.contains(static_cast<size_t>(c - base), bytes, nullptr) ? static_cast<uint64_t>(c - base)
                                                                        : sched::kStagedInput;
}

symmarResult_t HostBackend::checkCallable(void* stream) const {
  if (stream != nullptr) return fail(symmarInvalidArgument, "host backend: stream must be NULL");
  if (!heap_) {
    return fail(symmarUnsupported, "host backend: the hosts have different numbers of ranks, so no shared-memory "
                "path (only the fallback serves)");
  }
  if (placement_.hosts > 1 && !inter_host_) {
    return fail(symmarUnsupported, "host backend: the ranks span %d hosts and no inter-host engine is set "
                "(symmarCommSetInterHost; symmarCommInitMpi sets one)", placement_.hosts);
  }
  return checkNotBroken();
}

symmarResult_t HostBackend::checkNotBroken() const {
  if (sync_ && !sync_->broken().empty()) {
    return fail(symmarInvalidUsage, "the comm failed earlier: %s; destroy it", sync_->broken().c_str());
  }
  return symmarSuccess;
}

symmarResult_t HostBackend::allReduce(const AllReduceCall& c) {
  SYMMAR_CHECK(checkCallable(c.stream));
  const Call call{static_cast<const char*>(c.send), static_cast<char*>(c.recv), c.count, c.dtype, c.op, c.algo,
                  c.elem(), callSignature(c)};
  const size_t count = c.count;
  const symmarAlgo_t algo = c.algo;
  if (world_ == 1) {
    if (inter_host_) {  // alone on its host: the input is the host's partial
      copyToPieces(call, call.send, count);
      return combineStaged(call, 0, count, nullptr);
    }
    if (c.send != c.recv && count > 0) memmove(c.recv, c.send, c.bytes());
    return symmarSuccess;
  }
  // Count 0 moves no data but still takes part: the call signature is checked like any other, so
  // a rank that skipped a call (or passed 0 where its peers did not) is caught, not paired with
  // its peers' next call.
  if (algo == symmarAlgoLamport) return runLamport(call);  // count 0 too: it takes part the same way
  if (count == 0) {
    SYMMAR_CHECK(matchCall(call.signature));
    return combineFromOutput(call, 0, 0, nullptr);
  }
  return algo == symmarAlgoOneShot ? runOneShot(call) : runTwoShot(call);
}

symmarResult_t HostBackend::matchCall(uint64_t signature) {
  SYMMAR_CHECK(checkNotBroken());
  // A barrier that compares signatures and moves nothing (count-0 calls take it too). Across hosts it
  // matches this host's ranks (the fallback's own collective spans the hosts); hosts of different
  // sizes share no memory to meet in, and their calls pair by order alone, as the fallback's do.
  if (!heap_ || world_ == 1) return symmarSuccess;
  return sync_->barrier(sched::kSlotStart, sched::kStagedInput, signature);
}

symmarResult_t HostBackend::setHostThreads(int threads, symmarParallelForFn run, void* user) {
  if (placement_.hosts > 1) {
    return fail(symmarUnsupported, "symmarCommSetHostThreads: this comm spans hosts; its steps run on the calling "
                "thread");
  }
  std::unique_ptr<PartRunner> runner;
  if (threads > 1 && run) {
    runner = std::make_unique<EnginePool>(threads, run, user);
  } else if (threads > 1) {
    runner = std::make_unique<WorkerPool>(threads);
    // Helpers inherit this thread's affinity: where it allows fewer CPUs than threads, they share
    // them (an engine that bound its main thread to one core gives them that core alone).
    const int cpus = cpusOfThisThread();
    const unsigned cores = std::thread::hardware_concurrency();
    const int64_t wanted = static_cast<int64_t>(ctx_.machine_ranks) * runner->threads();
    if (cpus > 0 && cpus < runner->threads()) {
      SYMMAR_WARN(kSubsysInit, "host: %d threads a rank, but this thread may run on %d CPU(s), which its helpers "
                  "inherit: they share them (bind the thread to more CPUs, or pass the engine's thread pool to "
                  "symmarCommSetHostThreads)", runner->threads(), cpus);
    } else if (cores == 0 || wanted > static_cast<int64_t>(cores)) {
      SYMMAR_WARN(kSubsysInit, "host: %d threads a rank for %d ranks on %u cores: the helpers share cores, "
                  "which slows large allreduces (SYMMAR_HOST_THREADS)", runner->threads(), ctx_.machine_ranks,
                  cores);
    }
  }
  workers_ = std::move(runner);
  part_srcs_.resize(static_cast<size_t>(workerThreads()) * static_cast<size_t>(world_));
  SYMMAR_INFO(kSubsysInit, "host: a large step runs in up to %d parts on %s", workerThreads(),
              run ? "the engine's thread pool" : (workers_ ? "this thread and its helpers" : "this thread"));
  return symmarSuccess;
}

symmarResult_t HostBackend::memAlloc(size_t bytes, void** ptr) {
  if (!heap_) return fail(symmarUnsupported, "symmarMemAlloc: the ranks share no memory (several hosts)");
  size_t offset = 0;
  uint64_t mine = arena_.allocate(bytes, &offset) ? offset : UINT64_MAX;
  // Over every rank of the comm (all hosts): a symmetric buffer has one offset everywhere.
  std::vector<uint64_t> all(static_cast<size_t>(ctx_.nranks));
  all[static_cast<size_t>(ctx_.rank)] = mine;
  symmarResult_t res = ctx_.bootstrap->allGather(all.data(), sizeof(uint64_t));
  bool agree = res == symmarSuccess;
  for (uint64_t v : all) agree = agree && v == mine;
  if (!agree || mine == UINT64_MAX) {
    if (mine != UINT64_MAX) arena_.release(offset);
    SYMMAR_CHECK(res);
    if (mine == UINT64_MAX) {
      return fail(symmarOutOfMemory, "symmarMemAlloc(%zu): the symmetric heap (%zu bytes, SYMMAR_HEAP_BYTES) is full",
                  bytes, arena_.capacity());
    }
    return fail(symmarInvalidUsage, "symmarMemAlloc(%zu): ranks disagree (different sizes or call order)", bytes);
  }
  *ptr = heap_->userBase(rank_) + offset;
  return symmarSuccess;
}

symmarResult_t HostBackend::memFree(void* ptr) {
  char* p = static_cast<char*>(ptr);
  char* base = heap_ ? heap_->userBase(rank_) : nullptr;
  const bool mine = heap_ && p >= base && static_cast<size_t>(p - base) < arena_.capacity() &&
                    arena_.release(static_cast<size_t>(p - base));
  if (!heap_) return fail(symmarInvalidArgument, "symmarMemFree: %p was not returned by symmarMemAlloc", ptr);
  // Collective even when this rank's pointer is bad, so no peer waits for it until its timeout.
  std::vector<uint64_t> all(static_cast<size_t>(ctx_.nranks));
  all[static_cast<size_t>(ctx_.rank)] = mine ? static_cast<uint64_t>(p - base) : UINT64_MAX;
  SYMMAR_CHECK(ctx_.bootstrap->allGather(all.data(), sizeof(uint64_t)));
  if (!mine)
    return fail(symmarInvalidArgument, "symmarMemFree: %p was not returned by symmarMemAlloc on this comm", ptr);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[static_cast<size_t>(ctx_.rank)]) {
      return fail(symmarInvalidUsage, "symmarMemFree: rank %d freed a different buffer than rank %d",
                  static_cast<int>(r), ctx_.rank);
    }
  }
  return symmarSuccess;
}

}  // namespace symmar

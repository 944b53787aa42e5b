#include "host/host_backend.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/host_layout.h"
#include "core/env.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/names.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SYMMAR_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SYMMAR_CPU_RELAX() asm volatile("yield")
#else
#define SYMMAR_CPU_RELAX() ((void)0)
#endif

namespace symmar {
namespace {

// Smallest chunk of a comm spanning hosts: each chunk pays an inter-host exchange. Measured on 2
// simulated hosts x 2 ranks (docs/performance.md): 256 KiB chunks (the single-host default) were
// behind MPI_Allreduce at 1-4 MiB, 4 MiB chunks at 4 MiB, 1 MiB chunks ahead at both.
constexpr size_t kInterHostChunkBytes = size_t{1} << 20;

// A process that exited (or is a zombie) will never arrive.
bool processDead(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return true;
  char state = '?';
  int scanned = fscanf(f, "%*d (%*[^)]) %c", &state);
  fclose(f);
  return scanned == 1 && (state == 'Z' || state == 'X');
}

}  // namespace

HostBackend::HostBackend(const BackendContext& ctx, const HostPlacement& placement)
    : ctx_(ctx), placement_(placement), rank_(placement.local_rank), world_(placement.local_size) {}

HostBackend::~HostBackend() {
  if (!heap_ || !heap_->mapped()) return;
  // Peers still waiting on this rank stop now instead of at their timeout. A failed rank stays
  // failed (noteCommFailed), so no late peer completes a call on its abandoned flags.
  uint32_t* state = &heap_->header(rank_)->state;
  if (__atomic_load_n(state, __ATOMIC_ACQUIRE) != kSegmentFailed) {
    __atomic_store_n(state, static_cast<uint32_t>(kSegmentLeft), __ATOMIC_RELEASE);
  }
}

void HostBackend::noteCommFailed() {
  // The comm failed outside this backend's barriers (e.g. in the fallback): from the next barrier
  // on this rank contributes nothing.
  if (!heap_ || !heap_->mapped()) return;
  if (__atomic_load_n(&heap_->header(rank_)->state, __ATOMIC_ACQUIRE) != kSegmentFailed) {
    markFailed(sched::nextEpoch(epoch_), call_ + 1);
  }
}

void HostBackend::markFailed(uint32_t epoch, uint32_t call) {
  SegmentHeader* h = heap_->header(rank_);
  __atomic_store_n(&h->failed_epoch, epoch, __ATOMIC_RELAXED);
  __atomic_store_n(&h->failed_call, call, __ATOMIC_RELAXED);
  __atomic_store_n(&h->state, static_cast<uint32_t>(kSegmentFailed), __ATOMIC_RELEASE);  // publishes both
}

symmarResult_t HostBackend::failCall(symmarResult_t res) {
  // epoch_ is the barrier of this call that failed or the last one this rank passed: from it on,
  // this rank contributed nothing peers may complete a call with.
  if (res == symmarTimeout || res == symmarPeerFailure) markFailed(epoch_);
  return res;
}

symmarResult_t HostBackend::create(const BackendContext& ctx, BackendFacts* facts, std::unique_ptr<Backend>* out) {
  Bootstrap& boot = *ctx.bootstrap;
  std::vector<ProcessIdentity> ids(ctx.nranks);
  ids[ctx.rank] = selfIdentity();
  SYMMAR_CHECK(boot.allGather(ids.data(), sizeof(ProcessIdentity)));
  std::vector<uint64_t> host_of(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) host_of[r] = ids[r].host_hash;
  const HostPlacement placement = placeRanks(host_of, ctx.rank);
  const std::vector<int> host_ranks = ranksOnHost(host_of, ctx.rank);
  const bool local = placement.hosts == 1;
  std::unique_ptr<HostBackend> b(new HostBackend(ctx, placement));
  b->host_ranks_ = host_ranks;

  std::vector<uint64_t> nonces(ctx.nranks, 0);
  nonces[ctx.rank] = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  SYMMAR_CHECK(boot.allGather(nonces.data(), sizeof(uint64_t)));

  facts->topo.cc_major = 0;
  facts->topo.cc_minor = 0;
  // Across hosts the link stays unknown (fallback only) until an inter-host engine is set.
  facts->topo.link = local ? symmarLinkHostMemory : symmarLinkUnknown;
  facts->placement = placement;
  facts->topo.world_size = ctx.nranks;
  facts->topo.multicast = 0;
  // The sizes and the start epoch arrive agreed across ranks (api_comm.cc).
  facts->staging_bytes = ctx.settings.staging_bytes;
  b->chunk_cap_ = ctx.settings.host_chunk_bytes;
  // Across hosts every chunk pays a round trip through the inter-host engine: fewer, larger ones.
  if (!local) b->chunk_cap_ = std::max(b->chunk_cap_, kInterHostChunkBytes);
  b->epoch_ = ctx.settings.epoch_start;
  b->call_ = ctx.settings.epoch_start;  // so that a test can start near the call number's wrap too
  b->srcs_.resize(ctx.nranks);
  // Busy polling pays only while every rank has a core: count the ranks on this machine (simulated
  // hosts share one).
  unsigned on_machine = 0;
  for (const ProcessIdentity& id : ids) on_machine += id.machine_hash == ids[ctx.rank].machine_hash;
  unsigned cores = std::thread::hardware_concurrency();
  const int64_t spin = (cores == 0 || on_machine > cores) ? 16 : 4096;
  b->spin_limit_ = static_cast<int>(envNumber("SYMMAR_HOST_SPIN", spin));

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
    // The nonce of the host's first rank names its sockets: every host's differ.
    SYMMAR_CHECK(heap->create(*host_boot, nonces[static_cast<size_t>(host_ranks[0])], facts->staging_bytes,
                              heap_bytes, b->epoch_, ctx.settings.timeout_ms));
    b->heap_ = std::move(heap);  // only a fully mapped heap: the destructor writes through it
    b->arena_ = SymmetricArena(heap_bytes);
  }
  *out = std::move(b);
  return symmarSuccess;
}

symmarResult_t HostBackend::peerFailed(int peer, uint32_t target) {
  const SegmentHeader* h = heap_->header(peer);
  if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != kSegmentFailed) return symmarSuccess;
  if (!sched::epochReached(target, __atomic_load_n(&h->failed_epoch, __ATOMIC_RELAXED))) return symmarSuccess;
  return fail(symmarPeerFailure,
              "rank %d failed this call (timeout or peer loss): no rank may complete a call that a peer did not finish",
              commRank(peer));
}

symmarResult_t HostBackend::peerFailedCall(int peer, uint32_t call) {
  const SegmentHeader* h = heap_->header(peer);
  if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != kSegmentFailed) return symmarSuccess;
  // The wrap-safe comparison of epochs: call numbers wrap the same way.
  if (!sched::epochReached(call, __atomic_load_n(&h->failed_call, __ATOMIC_RELAXED))) return symmarSuccess;
  return fail(symmarPeerFailure,
              "rank %d failed this call (timeout or peer loss) after publishing its data: no rank may complete a call "
              "that a peer did not finish",
              commRank(peer));
}

symmarResult_t HostBackend::peerGone(int peer) {
  if (__atomic_load_n(&heap_->header(peer)->state, __ATOMIC_ACQUIRE) == kSegmentFailed) {
    return fail(symmarPeerFailure, "rank %d failed a call and will not arrive at this one", commRank(peer));
  }
  if (__atomic_load_n(&heap_->header(peer)->state, __ATOMIC_ACQUIRE) == kSegmentLeft) {
    return fail(symmarPeerFailure, "rank %d destroyed its comm before making this call", commRank(peer));
  }
  int pid = heap_->header(peer)->pid;
  if (pid != getpid() && processDead(pid)) {
    return fail(symmarPeerFailure, "rank %d (pid %d) exited while this rank waited for it", commRank(peer), pid);
  }
  return symmarSuccess;
}

void HostBackend::relaxCpu() { SYMMAR_CPU_RELAX(); }

symmarResult_t HostBackend::waitPeer(int peer, int slot, uint32_t target) {
  const uint32_t* flag = heap_->flag(peer, 0, slot);
  auto arrived = [flag, target] { return sched::epochReached(__atomic_load_n(flag, __ATOMIC_ACQUIRE), target); };
  // A peer that began the next lamport call without this barrier made another call than this
  // rank. The header is looked at only while the flag is missing, and the flag again after it: a
  // peer that passed this barrier and went on to a lamport call raised its flag first.
  bool other_call = false;
  symmarResult_t res = waitUntil(
      peer,
      [&] {
        if (arrived()) return true;
        other_call = lamportStarted(peer) && !arrived();
        return other_call;
      },
      "a barrier");
  if (res == symmarSuccess && other_call) {
    // The peer's lamport data sits in this rank's buffer, and this rank's flag is raised, for calls
    // the other rank did not make: kept, either would pair with a later call. Peers learn it from
    // this rank's failed state; this rank refuses every later call.
    markFailed(epoch_);
    symmarResult_t r = fail(symmarInvalidUsage,
                            "collective mismatch: rank %d made a lamport call where rank %d made another call; every "
                            "rank must make the same calls in the same order",
                            commRank(peer), commRank(rank_));
    broken_ = threadLastError();
    return r;
  }
  return res;
}

namespace {
uint64_t* flagWord(uint32_t* flag, size_t offset) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(flag) + offset);
}
}  // namespace

symmarResult_t HostBackend::barrier(int slot, uint64_t input_offset, uint64_t sig) {
  if (sig != 0) {  // a call's first barrier: the call takes its number, and the signature names it
    call_ = call_ + 1;
    sig = numberedSignature(sig, call_);
  }
  epoch_ = sched::nextEpoch(epoch_);
  uint32_t* own = heap_->flag(rank_, 0, slot);
  __atomic_store_n(flagWord(own, sched::paritySlotOffset(epoch_, 0)), input_offset, __ATOMIC_RELAXED);
  __atomic_store_n(flagWord(own, sched::paritySlotOffset(epoch_, 1)), sig, __ATOMIC_RELAXED);
  __atomic_store_n(own, epoch_, __ATOMIC_RELEASE);  // publishes the words above with the epoch
  for (int i = 1; i < world_; ++i) {
    const int peer = (rank_ + i) % world_;
    symmarResult_t res = waitPeer(peer, slot, epoch_);
    // A flag raised by a rank that then failed the call is no contribution: fail as it did.
    if (res == symmarSuccess) res = peerFailed(peer, epoch_);
    if (res != symmarSuccess) return failCall(res);
  }
  if (sig == 0) return symmarSuccess;
  for (int p = 0; p < world_; ++p) {
    uint64_t theirs =
        __atomic_load_n(flagWord(heap_->flag(p, 0, slot), sched::paritySlotOffset(epoch_, 1)), __ATOMIC_RELAXED);
    if (theirs != sig) {
      return fail(symmarInvalidUsage,
                  "collective mismatch: rank %d made another call (count, dtype, op, algorithm or place in the call "
                  "order) than rank %d; every rank must make the same calls in the same order",
                  commRank(p), commRank(rank_));
    }
  }
  return symmarSuccess;
}

uint64_t HostBackend::peerInputOffset(int peer, int slot, uint32_t epoch) const {
  return __atomic_load_n(flagWord(heap_->flag(peer, 0, slot), sched::paritySlotOffset(epoch, 0)), __ATOMIC_RELAXED);
}

symmarResult_t HostBackend::checkPeerInputOffset(int peer, uint64_t input_offset, const Call& c) {
  const uint64_t heap = heap_->heapBytes();
  const uint64_t bytes = static_cast<uint64_t>(c.count) * c.elem;
  if (input_offset == sched::kStagedInput ||
      (input_offset <= heap && bytes <= heap - input_offset && input_offset % c.elem == 0))
    return symmarSuccess;
  return failCall(fail(symmarPeerFailure,
                       "rank %d published an input offset (offset %llu, %llu bytes) outside its %llu-byte heap",
                       commRank(peer),
                       static_cast<unsigned long long>(input_offset), static_cast<unsigned long long>(bytes),
                       static_cast<unsigned long long>(heap)));
}

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
  if (!broken_.empty()) {
    return fail(symmarInvalidUsage, "the comm failed earlier: %s; destroy it", broken_.c_str());
  }
  return symmarSuccess;
}

symmarResult_t HostBackend::allReduce(const AllReduceCall& c) {
  SYMMAR_CHECK(checkCallable(c.stream));
  const Call call{static_cast<const char*>(c.send), static_cast<char*>(c.recv), c.count, c.dtype, c.op, c.algo, c.elem()};
  const size_t count = c.count;
  const symmarAlgo_t algo = c.algo;
  if (world_ == 1) {
    if (inter_host_) {  // alone on its host: the input is the host's partial
      copyToPieces(call, call.send, count);
      return acrossHosts(call, 0, count, nullptr, /*staged=*/true);
    }
    if (c.send != c.recv && count > 0) memmove(c.recv, c.send, c.bytes());
    return symmarSuccess;
  }
  // Count 0 moves no data but still takes part: the call signature is checked like any other, so
  // a rank that skipped a call (or passed 0 where its peers did not) is caught, not paired with
  // its peers' next call.
  if (algo == symmarAlgoLamport) return runLamport(call);  // count 0 too: it takes part the same way
  if (count == 0) {
    SYMMAR_CHECK(barrier(sched::kSlotStart, sched::kStagedInput, call.signature()));
    return acrossHosts(call, 0, 0, nullptr);
  }
  return algo == symmarAlgoOneShot ? runOneShot(call) : runTwoShot(call);
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

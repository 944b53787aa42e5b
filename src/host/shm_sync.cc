#include "host/shm_sync.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "core/call.h"

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

uint64_t* flagWord(uint32_t* flag, size_t offset) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(flag) + offset);
}

bool empty(const uint32_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE) == sched::kLamportEmpty; }

}  // namespace

ShmSync::ShmSync(ShmHeap* heap, int rank, int world, std::vector<int> comm_ranks, int timeout_ms, int spin_limit,
                 uint32_t start)
    : heap_(heap),
      rank_(rank),
      world_(world),
      comm_ranks_(std::move(comm_ranks)),
      timeout_ms_(timeout_ms),
      spin_limit_(spin_limit),
      epoch_(start),
      call_(start) {}

void ShmSync::relaxCpu() { SYMMAR_CPU_RELAX(); }

void ShmSync::markFailed(uint32_t epoch, uint32_t call) {
  SegmentHeader* h = heap_->header(rank_);
  __atomic_store_n(&h->failed_epoch, epoch, __ATOMIC_RELAXED);
  __atomic_store_n(&h->failed_call, call, __ATOMIC_RELAXED);
  __atomic_store_n(&h->state, static_cast<uint32_t>(kSegmentFailed), __ATOMIC_RELEASE);  // publishes both
}

symmarResult_t ShmSync::failCall(symmarResult_t res) {
  // epoch_ is the barrier of this call that failed or the last one this rank passed: from it on,
  // this rank contributed nothing peers may complete a call with.
  if (res == symmarTimeout || res == symmarPeerFailure) markFailed(epoch_, call_);
  return res;
}

symmarResult_t ShmSync::breakComm(symmarResult_t res, uint32_t from_epoch) {
  markFailed(from_epoch, call_);
  broken_ = threadLastError();
  return res;
}

void ShmSync::noteCommFailed() {
  if (__atomic_load_n(&heap_->header(rank_)->state, __ATOMIC_ACQUIRE) != kSegmentFailed) {
    markFailed(sched::nextEpoch(epoch_), call_ + 1);
  }
}

void ShmSync::leave() {
  uint32_t* state = &heap_->header(rank_)->state;
  if (__atomic_load_n(state, __ATOMIC_ACQUIRE) != kSegmentFailed) {
    __atomic_store_n(state, static_cast<uint32_t>(kSegmentLeft), __ATOMIC_RELEASE);
  }
}

symmarResult_t ShmSync::peerFailed(int peer, uint32_t target) {
  const SegmentHeader* h = heap_->header(peer);
  if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != kSegmentFailed) return symmarSuccess;
  if (!sched::epochReached(target, __atomic_load_n(&h->failed_epoch, __ATOMIC_RELAXED))) return symmarSuccess;
  return fail(symmarPeerFailure,
              "rank %d failed this call (timeout or peer loss): no rank may complete a call that a peer did not finish",
              commRank(peer));
}

symmarResult_t ShmSync::peerFailedCall(int peer, uint32_t call) {
  const SegmentHeader* h = heap_->header(peer);
  if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != kSegmentFailed) return symmarSuccess;
  // The wrap-safe comparison of epochs: call numbers wrap the same way.
  if (!sched::epochReached(call, __atomic_load_n(&h->failed_call, __ATOMIC_RELAXED))) return symmarSuccess;
  return fail(symmarPeerFailure,
              "rank %d failed this call (timeout or peer loss) after publishing its data: no rank may complete a call "
              "that a peer did not finish",
              commRank(peer));
}

symmarResult_t ShmSync::peerGone(int peer) {
  if (__atomic_load_n(&heap_->header(peer)->state, __ATOMIC_ACQUIRE) == kSegmentFailed) {
    return fail(symmarPeerFailure, "rank %d failed a call and will not arrive at this one", commRank(peer));
  }
  if (__atomic_load_n(&heap_->header(peer)->state, __ATOMIC_ACQUIRE) == kSegmentLeft) {
    return fail(symmarPeerFailure, "rank %d destroyed its comm before making this call", commRank(peer));
  }
  // A peer's pid is looked up in /proc only where it names a process of this pid namespace (in
  // another one it names another process here, or none) and /proc is there: without it every
  // peer would read as exited.
  static const uint64_t own_ns = pidNamespaceId();
  const SegmentHeader* h = heap_->header(peer);
  const int pid = h->pid;
  if (pid != getpid() && own_ns != 0 && h->pid_ns == own_ns && processDead(pid)) {
    return fail(symmarPeerFailure, "rank %d (pid %d) exited while this rank waited for it", commRank(peer), pid);
  }
  return symmarSuccess;
}

bool ShmSync::lamportStarted(int peer) const {
  return !empty(heap_->lamportSlot(rank_, lamport_buf_, peer) + ShmHeap::kLamportHeaderWord + 3);
}

symmarResult_t ShmSync::waitPeer(int peer, int slot, uint32_t target) {
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
    return breakComm(fail(symmarInvalidUsage,
                          "collective mismatch: rank %d made a lamport call where rank %d made another call; every "
                          "rank must make the same calls in the same order",
                          commRank(peer), commRank(rank_)),
                     epoch_);
  }
  return res;
}

symmarResult_t ShmSync::barrier(int slot, uint64_t input_offset, uint64_t sig) {
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

uint64_t ShmSync::peerInputOffset(int peer, int slot, uint32_t epoch) const {
  return __atomic_load_n(flagWord(heap_->flag(peer, 0, slot), sched::paritySlotOffset(epoch, 0)), __ATOMIC_RELAXED);
}

}  // namespace symmar

// The host backend's synchronisation protocol over the shared-memory heap: barrier epochs, the
// comm-wide call number, call signatures met at a call's first barrier, bounded waits that watch
// the peers' health, and the failed / left state that tells peers a call is no contribution. The
// executors (one-shot, two-shot, lamport, fused, across hosts) move data; this class decides when
// they may and whether a call counts.
#pragma once
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/schedule.h"
#include "host/shm_heap.h"

namespace symmar {

class ShmSync {
 public:
  /// heap: mapped, outliving this object. comm_ranks[r]: the comm's rank of this host's rank r
  /// (what messages name). start: the agreed first epoch and call number.
  ShmSync(ShmHeap* heap, int rank, int world, std::vector<int> comm_ranks, int timeout_ms, int spin_limit,
          uint32_t start);

  /// Arrives at the next barrier epoch on slot, publishing input_offset and sig with the flag, and
  /// waits (bounded) for every peer. sig != 0 marks a call's first barrier: the call takes its
  /// number, which is published with sig, and every peer must have published the same: a mismatch
  /// (ranks making different calls, or the same call at different places in the call sequence)
  /// gives symmarInvalidUsage on every rank.
  symmarResult_t barrier(int slot, uint64_t input_offset = sched::kStagedInput, uint64_t sig = 0);
  /// The input offset peer published with its flag of epoch on slot.
  uint64_t peerInputOffset(int peer, int slot, uint32_t epoch) const;
  /// Waits (bounded, yielding, watching peer's health) until ready() holds; what names the wait.
  template <typename Ready>
  symmarResult_t waitUntil(int peer, Ready ready, const char* what);
  /// symmarPeerFailure when peer failed call number `call` or an earlier one: data it published
  /// for that call is then no contribution (a lamport call has no barrier epoch of its own).
  symmarResult_t peerFailedCall(int peer, uint32_t call);

  /// Tells peers this rank failed the call in progress (they must fail it too) when res is a
  /// timeout or a peer failure; returns res.
  symmarResult_t failCall(symmarResult_t res);
  /// The comm cannot be used again (a mismatch, or an inter-host engine left with requests):
  /// peers fail every call from barrier epoch from_epoch on, this rank refuses every later call
  /// with res's message. Returns res.
  symmarResult_t breakComm(symmarResult_t res, uint32_t from_epoch);
  /// The comm failed outside these barriers (e.g. in the fallback): from the next call on this
  /// rank contributes nothing.
  void noteCommFailed();
  /// This rank destroyed its comm: peers waiting for it stop now. A failed rank stays failed, so
  /// no late peer completes a call on its abandoned flags.
  void leave();

  /// The barrier epoch of the call in progress (between calls: the last one passed).
  uint32_t epoch() const { return epoch_; }
  /// The comm-wide number the next call takes (at its first barrier, or from takeCallNumber).
  uint32_t nextCallNumber() const { return call_ + 1; }
  /// The comm-wide number the next call without a barrier (lamport) takes.
  uint32_t takeCallNumber() { return ++call_; }
  /// The lamport buffer the next lamport call writes; advance() after the call.
  int lamportBuffer() const { return lamport_buf_; }
  void advanceLamportBuffer() { lamport_buf_ = (lamport_buf_ + 1) % sched::kLamportBuffers; }
  /// Why the comm cannot be used again ("" while it can).
  const std::string& broken() const { return broken_; }
  /// The comm's rank of this host's rank `local`: what every message names.
  int commRank(int local) const { return comm_ranks_[static_cast<size_t>(local)]; }

 private:
  symmarResult_t waitPeer(int peer, int slot, uint32_t target);
  /// symmarPeerFailure when peer failed the call whose barrier has epoch target (or an earlier
  /// one this rank is still in): its flag at target is then no contribution.
  symmarResult_t peerFailed(int peer, uint32_t target);
  /// Failed, left without making this call, or exited: why peer will never arrive.
  symmarResult_t peerGone(int peer);
  /// peer has begun the lamport call this rank would make next (its header is in this rank's
  /// current lamport buffer): at a barrier, a sign that peer made a lamport call instead.
  bool lamportStarted(int peer) const;
  /// Marks this rank failed from barrier epoch and from call number `call` on (peers fail every
  /// call that reaches either).
  void markFailed(uint32_t epoch, uint32_t call);
  /// A pause for a spinning core (x86 pause, arm yield).
  static void relaxCpu();

  ShmHeap* heap_;
  const int rank_;
  const int world_;
  const std::vector<int> comm_ranks_;
  const int timeout_ms_;
  const int spin_limit_;  // busy polls before yielding (small when ranks outnumber cores)
  uint32_t epoch_;
  // The comm-wide number of the call in progress (between calls: of the last one). Every call that
  // takes part (lamport, barrier calls at their first barrier, count 0 and fused included) advances
  // it on every rank alike, so it names a call's place in the comm's whole call sequence. Wraps;
  // seeded by SYMMAR_EPOCH_START.
  uint32_t call_;
  int lamport_buf_ = 0;
  std::string broken_;
};

template <typename Ready>
symmarResult_t ShmSync::waitUntil(int peer, Ready ready, const char* what) {
  for (int i = 0; i < spin_limit_; ++i) {
    if (ready()) return symmarSuccess;
    relaxCpu();
  }
  // Slow path: yield, then sleep, and check the clock and the peer's health now and then.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = start + std::chrono::milliseconds(timeout_ms_);
  auto next_check = start;
  for (uint64_t i = 0;; ++i) {
    if (ready()) return symmarSuccess;
    if (i < 1000) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if ((i & 63) == 0) {
      auto now = Clock::now();
      if (now >= next_check) {
        symmarResult_t gone = peerGone(peer);
        // A peer that arrived and then left (destroyed its comm) is not a failure: look again.
        if (gone != symmarSuccess && !ready()) return gone;
        next_check = now + std::chrono::milliseconds(10);
      }
      if (now >= limit) {
        return fail(symmarTimeout, "rank %d did not arrive at %s within %d ms", commRank(peer), what, timeout_ms_);
      }
    }
  }
}

}  // namespace symmar

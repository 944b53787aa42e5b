// The host backend: CPU ranks (processes or threads on one host) reducing through the shared
// memory heap with the same schedules as the GPU kernels. Each collective is complete on return.
#pragma once
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/symmetric_arena.h"
#include "host/inter_host.h"
#include "host/shm_heap.h"

namespace symmar {

class HostBackend : public Backend {
 public:
  /// Collective: probes locality, agrees the sizes, maps the heap among the ranks of each host
  /// (when every host has as many ranks); reports the topology, the placement and the agreed
  /// staging size in facts. Across hosts the heap serves once an inter-host engine is set
  /// (setInterHost); until then only the fallback can. (The mpi fallback is called by the API
  /// layer, which holds it.)
  static symmarResult_t create(const BackendContext& ctx, BackendFacts* facts, std::unique_ptr<Backend>* out);
  void noteCommFailed() override;
  ~HostBackend() override;

  symmarResult_t allReduce(const AllReduceCall& call) override;
  symmarResult_t allReduceAddRmsNorm(const AddRmsNormCall& call) override;
  symmarResult_t memAlloc(size_t bytes, void** ptr) override;
  symmarResult_t memFree(void* ptr) override;
  symmarResult_t setInterHost(const InterHostCarrier& carrier) override;

 private:
  /// An allreduce as the executors address it: byte pointers, the element size at hand.
  struct Call {
    const char* send;
    char* recv;
    size_t count;
    symmarDataType_t dtype;
    symmarRedOp_t op;
    symmarAlgo_t algo;
    size_t elem;
    uint64_t signature() const { return callSignature(count, dtype, op, algo); }
  };

  HostBackend(const BackendContext& ctx, const HostPlacement& placement);
  /// What every collective checks first: no stream, shared memory (and an inter-host engine when
  /// the ranks span hosts), a comm no lamport or inter-host mismatch broke.
  symmarResult_t checkCallable(void* stream) const;
  /// A pause for a spinning core (x86 pause, arm yield).
  static void relaxCpu();
  symmarResult_t runOneShot(const Call& call);  // host_oneshot.cc
  symmarResult_t runTwoShot(const Call& call);  // host_twoshot.cc
  symmarResult_t runLamport(const Call& call);  // host_lamport.cc
  /// Across hosts: combines this rank's part of a call's result (elements [begin, begin + n), reduced
  /// over this host: in the output, or already in the inter-host pieces when staged) with the other
  /// hosts' (InterHost::combine), into the output and into publish when not null. A failure breaks
  /// the comm (engine requests may be left behind) and tells this host's peers. Nothing to do on a
  /// single-host comm.
  symmarResult_t acrossHosts(const Call& call, size_t begin, size_t n, char* publish, bool staged = false);
  /// Reduces n elements of the world_ sources in srcs_ into the inter-host pieces (no copy after).
  void reduceToPieces(const Call& call, size_t n);
  /// Copies n elements from src into the inter-host pieces.
  void copyToPieces(const Call& call, const char* src, size_t n);
  /// peer has begun the lamport call this rank would make next (its header is in this rank's
  /// current lamport buffer): at a barrier, a sign that peer made a lamport call instead.
  bool lamportStarted(int peer) const;
  /// Waits (bounded, yielding, watching peer's health) until ready() holds; what names the wait.
  template <typename Ready>
  symmarResult_t waitUntil(int peer, Ready ready, const char* what);
  /// Arrives at the next barrier epoch on slot, publishing input_offset and sig with the flag, and waits
  /// (bounded) for every peer. sig != 0 marks a call's first barrier: the call takes its number
  /// (call_), which is published with sig, and every peer must have published the same: a mismatch
  /// (ranks making different calls, or the same call at different places in the call sequence)
  /// gives symmarInvalidUsage on every rank.
  symmarResult_t barrier(int slot, uint64_t input_offset = sched::kStagedInput, uint64_t sig = 0);
  /// The input offset peer published with its flag of epoch on slot.
  uint64_t peerInputOffset(int peer, int slot, uint32_t epoch) const;
  /// Offset of [p, p + bytes) in this rank's user heap when it lies in one symmarMemAlloc block
  /// (peers may then read it in place), else kStagedInput.
  uint64_t symmetricOffset(const void* p, size_t bytes) const;
  symmarResult_t waitPeer(int peer, int slot, uint32_t target);
  /// symmarPeerFailure when peer failed the call whose barrier has epoch target (or an earlier one
  /// this rank is still in): its flag at target is then no contribution.
  symmarResult_t peerFailed(int peer, uint32_t target);
  /// symmarPeerFailure when peer failed call number `call` or an earlier one: data it published for
  /// that call is then no contribution (a lamport call has no barrier epoch of its own).
  symmarResult_t peerFailedCall(int peer, uint32_t call);
  /// Failed, left without making this call, or exited: why peer will never arrive.
  symmarResult_t peerGone(int peer);
  /// A peer's input offset must name count elements inside its user heap, or the call fails.
  symmarResult_t checkPeerInputOffset(int peer, uint64_t input_offset, const Call& c);
  /// Tells peers this rank failed a call (they must fail it too); returns res.
  symmarResult_t failCall(symmarResult_t res);
  /// Marks this rank failed from barrier epoch and from call number `call` on (peers fail every call
  /// that reaches either); the one-argument form fails from the call in progress.
  void markFailed(uint32_t epoch, uint32_t call);
  void markFailed(uint32_t epoch) { markFailed(epoch, call_); }
  /// Elements per chunk: a staging half, capped so a chunk's working set stays in cache.
  size_t chunkElems(size_t elem) const {
    return sched::chunkElems(std::min(heap_->stagingBytes(), 2 * chunk_cap_), elem, world_);
  }
  /// The half of the staging buffer the next step may write without a barrier.
  int takeWriteHalf() { return last_read_half_ ^ 1; }
  /// The comm's rank of this host's rank `local`: what every message names (on a comm spanning
  /// hosts the local index is no rank a user knows).
  int commRank(int local) const { return host_ranks_[static_cast<size_t>(local)]; }

  BackendContext ctx_;
  const HostPlacement placement_;
  const int rank_;   // index among this host's ranks (the comm's rank on a single host)
  const int world_;  // ranks on this host (the comm's size on a single host)
  std::vector<int> host_ranks_;  // the comm's rank of each of this host's ranks, by local index
  std::unique_ptr<Bootstrap> host_bootstrap_;  // this host's ranks, when the comm spans hosts
  std::unique_ptr<InterHost> inter_host_;      // the engine between hosts, once set
  std::unique_ptr<ShmHeap> heap_;  // null when the hosts have different numbers of ranks
  SymmetricArena arena_{0};
  uint32_t epoch_ = 0;
  int last_read_half_ = 1;        // half peers may still be reading after the previous step
  size_t chunk_cap_ = 0;          // bytes per chunk at most (SYMMAR_HOST_CHUNK_BYTES)
  int spin_limit_ = 0;            // busy polls before yielding (small when ranks outnumber cores)
  std::vector<const void*> srcs_;  // per-rank source pointers, reused by every call
  std::vector<const void*> piece_srcs_;  // srcs_ advanced to one inter-host piece
  // The comm-wide number of the call in progress (between calls: of the last one). Every call that
  // takes part (lamport, barrier calls at their first barrier, count 0 and fused included) advances
  // it on every rank alike, so it names a call's place in the comm's whole call sequence. Wraps;
  // seeded by SYMMAR_EPOCH_START.
  uint32_t call_ = 0;
  int lamport_buf_ = 0;  // the lamport buffer the next lamport call writes, advanced mod kLamportBuffers
  std::string broken_;   // why a mismatch with a lamport call, or across hosts, left the comm unusable ("" if none)
  size_t lamport_used_[sched::kLamportBuffers] = {};  // words per slot the last call of each buffer wrote
};

template <typename Ready>
symmarResult_t HostBackend::waitUntil(int peer, Ready ready, const char* what) {
  for (int i = 0; i < spin_limit_; ++i) {
    if (ready()) return symmarSuccess;
    relaxCpu();
  }
  // Slow path: yield, then sleep, and check the clock and the peer's health now and then.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = start + std::chrono::milliseconds(ctx_.settings.timeout_ms);
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
        return fail(symmarTimeout, "rank %d did not arrive at %s within %d ms", commRank(peer), what,
                    ctx_.settings.timeout_ms);
      }
    }
  }
}

}  // namespace symmar

// The host backend: CPU ranks (processes or threads on one host) reducing through the shared
// memory heap with the same schedules as the GPU kernels. Each collective is complete on return.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/schedule.h"
#include "core/symmetric_arena.h"
#include "host/host_reduce.h"
#include "host/inter_host.h"
#include "host/shm_heap.h"
#include "host/shm_sync.h"
#include "host/simd_reduce.h"
#include "host/staging_writes.h"
#include "host/worker_pool.h"

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
  symmarResult_t addRmsNormRows(const AddRmsNormCall& call, const void* sums) override;  // host_fused.cc
  bool hasAddRmsNormRows() const override { return true; }
  symmarResult_t scatterGather(const ScatterGatherCall& call) override;  // host_scatter_gather.cc
  symmarResult_t memAlloc(size_t bytes, void** ptr) override;
  symmarResult_t memFree(void* ptr) override;
  symmarResult_t setInterHost(const InterHostCarrier& carrier) override;
  symmarResult_t setHostThreads(int threads, symmarParallelForFn run, void* user) override;

  /// The barrier epoch this rank reached (each barrier advances it by one), for the tests that
  /// count a schedule's barriers; 0 where the comm has no shared memory.
  uint32_t barrierEpoch() const;
  /// Whether every rank can read its peers' processes (cross_memory.h): an all-gather's large
  /// caller send buffers are then read there instead of staged. Agreed at creation.
  bool readsPeerProcesses() const { return cross_memory_; }
  /// Whether calls stage in the staging ring (sched::stagingRingShift). Agreed at creation.
  bool usesStagingRing() const { return staging_ring_; }
  /// Threads this rank runs a two-shot step's copies and reductions on (SYMMAR_HOST_THREADS,
  /// setHostThreads).
  int workerThreads() const { return workers_ ? workers_->threads() : 1; }
  /// The ranks' shared segments (null where the comm has none), for tests that inspect staging.
  const ShmHeap* heap() const { return heap_.get(); }

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
    uint64_t signature;  // callSignature of the AllReduceCall: what peers compare
  };

  explicit HostBackend(const BackendContext& ctx);
  /// What every collective checks first: no stream, shared memory (and an inter-host engine when
  /// the ranks span hosts), a comm no lamport or inter-host mismatch broke.
  symmarResult_t checkCallable(void* stream) const;
  /// symmarInvalidUsage where an earlier call broke the comm (a lamport or inter-host mismatch).
  symmarResult_t checkNotBroken() const;
  /// A call that moves nothing here (count 0, or one the host fallback moves): its signature
  /// meets the local peers' at a barrier.
  symmarResult_t matchCall(uint64_t signature) override;
  /// A comm an earlier call broke (checkNotBroken) reports it, with its cause.
  symmarResult_t asyncError() override { return checkNotBroken(); }
  /// Where the call about to start, writing at most bytes into each staging half, stages: its slot
  /// of the staging ring where the comm uses it, else 0 (the half's start). from: as
  /// sched::stagingRingSlots.
  size_t stagingShift(size_t bytes, size_t from = sched::kStagingRingMinBytes) const {
    return staging_ring_ ? sched::stagingRingShift(bytes, heap_->stagingBytes(), sync_->nextCallNumber(), from) : 0;
  }
  /// Whether such a call stages in a slot of the ring (whose lines no peer read the call before).
  bool stagesInRing(size_t bytes, size_t from = sched::kStagingRingMinBytes) const {
    return staging_ring_ && sched::stagingRingSlots(bytes, heap_->stagingBytes(), from) != 0;
  }
  symmarResult_t runOneShot(const Call& call);  // host_oneshot.cc
  symmarResult_t runTwoShot(const Call& call);  // host_twoshot.cc
  /// One lamport message per peer (host_lamport.cc): peer p gets bytes from send + p * stride;
  /// travelling: sent in the allreduce's encoding (no word equal to the empty pattern), else raw.
  struct LamportMessage {
    uint64_t signature;
    const char* send;
    size_t stride;
    size_t bytes;
    size_t elem;
    bool travelling;
  };
  /// Publishes m to every peer (and to this rank's own slot when travelling), waits for every
  /// peer's message of this call and checks it; then srcs_[p] points at peer p's data (srcs_[rank_]
  /// at this rank's own slot). A mismatch or corrupt data breaks the comm.
  symmarResult_t lamportExchange(const LamportMessage& m);
  /// After the data of a lamport call of `bytes` per slot was used: clears the buffer the previous
  /// call read and moves on to the next buffer.
  void retireLamportBuffer(size_t bytes);
  symmarResult_t runLamport(const Call& call);  // host_lamport.cc
  symmarResult_t runLamportScatterGather(const ScatterGatherCall& call);
  symmarResult_t runReduceScatter(const ScatterGatherCall& call);  // host_scatter_gather.cc
  symmarResult_t runAllGather(const ScatterGatherCall& call);
  // Across hosts (host_scatter_gather_hosts.cc): within each host as above, between hosts through
  // the inter-host engine; chunk by chunk (r: the chunk of each block, sig: the call's signature on
  // its first chunk, else 0).
  symmarResult_t scatterGatherAcrossHosts(const ScatterGatherCall& call);
  symmarResult_t reduceScatterChunkAcrossHosts(const ScatterGatherCall& call, sched::Range r, uint64_t sig);
  symmarResult_t allGatherChunkAcrossHosts(const ScatterGatherCall& call, sched::Range r, uint64_t sig);
  /// The comm's rank at local index `local` of host `host` (as many ranks on every host).
  int rankAt(int host, int local) const;
  /// An inter-host stage's result; a failure breaks the comm (engine requests may be left behind)
  /// and tells this host's peers.
  symmarResult_t interHostStage(symmarResult_t res);
  // Across hosts (host_hierarchy.cc): combines this rank's part of a call's result (elements
  // [begin, begin + n), reduced over this host) with the other hosts' (InterHost::combine), into
  // the output and into publish when not null. A failure breaks the comm (engine requests may be
  // left behind) and tells this host's peers. Nothing to do on a single-host comm.
  /// The part is in the output: it is copied into the inter-host pieces first.
  symmarResult_t combineFromOutput(const Call& call, size_t begin, size_t n, char* publish);
  /// The part is already in the inter-host pieces (reduced or copied there by the executor).
  symmarResult_t combineStaged(const Call& call, size_t begin, size_t n, char* publish);
  /// Reduces n elements of the world_ sources in srcs_ into the inter-host pieces (no copy after).
  void reduceToPieces(const Call& call, size_t n);
  /// Copies n elements from src into the inter-host pieces.
  void copyToPieces(const Call& call, const char* src, size_t n);
  /// Offset of [p, p + bytes) in this rank's user heap when it lies in one symmarMemAlloc block
  /// (peers may then read it in place), else kStagedInput.
  uint64_t symmetricOffset(const void* p, size_t bytes) const;
  /// A peer's input offset must name count elements inside its user heap, or the call fails.
  symmarResult_t checkPeerInputOffset(int peer, uint64_t input_offset, const Call& c) {
    return checkPeerInputOffset(peer, input_offset, c.count * c.elem, c.elem);
  }
  /// The same for an input of bytes, aligned to elem.
  symmarResult_t checkPeerInputOffset(int peer, uint64_t input_offset, size_t bytes, size_t elem);
  /// Where peer p's input for the current step starts as this rank reads it: in its user heap at
  /// the offset it published at the start barrier (`word`, checked against its input's bytes), or
  /// null when it staged it.
  symmarResult_t peerInput(int p, uint64_t word, size_t bytes, size_t elem, const char** input);
  /// Copies bytes from address `remote` in peer p's process (a send buffer it published,
  /// cross_memory.h) to dst. A failed read fails the call on every rank (symmarPeerFailure).
  symmarResult_t readPeerProcess(int p, char* dst, uint64_t remote, size_t bytes);
  /// Elements per chunk: a staging half, capped so a chunk's working set stays in cache.
  size_t chunkElems(size_t elem) const {
    return sched::chunkElems(std::min(heap_->stagingBytes(), 2 * chunk_cap_), elem, world_);
  }
  /// Makes one chunk's staging writes, `bytes` in all: write(copy), copy being simdStreamCopy where
  /// `stream` (staging_writes_.streams), else copyBytes, timed for staging_writes_ where it asks.
  template <typename Write>
  void writeStaging(size_t bytes, bool stream, Write write) {
    if (stream) return write(simdStreamCopy);
    if (!staging_writes_.times(bytes)) return write(copyBytes);
    const auto start = std::chrono::steady_clock::now();
    write(copyBytes);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    staging_writes_.afterPlain(bytes, static_cast<uint64_t>(ns.count()));
  }
  /// writeStaging for one chunk: the choice made here, and a streamed chunk counted. Returns
  /// whether it streamed (the chunk's other staging writes, if any, follow the same choice).
  template <typename Write>
  bool stageChunk(size_t bytes, Write write) {
    const bool stream = staging_writes_.streams(bytes);
    writeStaging(bytes, stream, write);
    if (stream) staging_writes_.afterStreamed();
    return stream;
  }
  /// Calls fn(part, begin, n) on pieces [begin, begin + n) covering [0, count) elements of elem
  /// bytes: at once on the rank's worker threads (SYMMAR_HOST_THREADS), part 0 to threads - 1, where
  /// the bytes give each thread kMinPartBytes or more, pieces starting on a cache line of the range;
  /// else once, as part 0 on this thread. fn must only touch its own piece (and part's own scratch).
  template <typename Fn>
  void inParts(size_t count, size_t elem, Fn fn) {
    const size_t by_bytes = count * elem / kMinPartBytes;
    const int parts = workers_ ? static_cast<int>(std::min<size_t>(workers_->threads(), by_bytes)) : 1;
    if (parts <= 1) return fn(0, size_t{0}, count);
    const size_t line = std::max<size_t>(1, 64 / elem);
    workers_->run(parts, [&](int i, int n) {
      const sched::Range q = sched::splitRange(0, count, n, i, line);
      if (q.size() > 0) fn(i, q.begin, q.size());
    });
  }
  /// copyBytes(dst, src, bytes) in parts on the rank's threads (inParts).
  void copyInParts(char* dst, const char* src, size_t bytes) {
    inParts(bytes, 1, [&](int, size_t b, size_t n) { copyBytes(dst + b, src + b, n); });
  }
  /// The sources (srcs_, one per rank) of the piece of a step that begins b elements of elem bytes
  /// in, for the part that runs it: srcs_ itself for the piece at 0, else the part's own row of
  /// part_srcs_, set to srcs_ advanced by b elements.
  const void** partSources(int part, size_t b, size_t elem) {
    if (b == 0) return srcs_.data();
    const void** row = sourcesOfPart(part);
    for (int p = 0; p < world_; ++p) row[p] = static_cast<const char*>(srcs_[static_cast<size_t>(p)]) + b * elem;
    return row;
  }
  /// A row of world_ source pointers for the part that runs a piece of a step: srcs_ for part 0,
  /// else the part's own row of part_srcs_ (the caller fills it).
  const void** sourcesOfPart(int part) {
    return part == 0 ? srcs_.data() : part_srcs_.data() + static_cast<size_t>(part) * static_cast<size_t>(world_);
  }
  /// The least a worker thread's piece of a step is worth waking it for.
  static constexpr size_t kMinPartBytes = 64 << 10;
  /// The half of the staging buffer the next step may write without a barrier.
  int takeWriteHalf() { return last_read_half_ ^ 1; }
  /// The comm's rank of this host's rank `local`: what every message names (on a comm spanning
  /// hosts the local index is no rank a user knows).
  int commRank(int local) const { return ctx_.host_ranks[static_cast<size_t>(local)]; }

  BackendContext ctx_;
  const HostPlacement placement_;
  const int rank_;                             // index among this host's ranks (the comm's rank on a single host)
  const int world_;                            // ranks on this host (the comm's size on a single host)
  std::unique_ptr<Bootstrap> host_bootstrap_;  // this host's ranks, when the comm spans hosts
  std::unique_ptr<InterHost> inter_host_;      // the engine between hosts, once set
  std::unique_ptr<ShmHeap> heap_;              // null when the hosts have different numbers of ranks
  SymmetricArena arena_{0};
  std::unique_ptr<ShmSync> sync_;                     // with the heap: barriers, call numbers, failure words
  int last_read_half_ = 1;                            // half peers may still be reading after the previous step
  bool cross_memory_ = false;                         // every rank can read its peers' processes (cross_memory.h)
  bool staging_ring_ = false;                         // calls stage in the ring (sched::stagingRingShift)
  StagingWrites staging_writes_;                      // plain or streaming stores into staging (SYMMAR_HOST_STREAM)
  std::vector<int> peer_pids_;                        // the processes the probe read: where every later read goes
  size_t chunk_cap_ = 0;                              // bytes per chunk at most (SYMMAR_HOST_CHUNK_BYTES)
  std::unique_ptr<PartRunner> workers_;               // the threads of a step's parts (more than 1), else null
  std::vector<const void*> srcs_;                     // per-rank source pointers, reused by every call
  std::vector<const void*> part_srcs_;                // srcs_ advanced to each worker's piece: a row a part
  std::vector<const void*> piece_srcs_;               // srcs_ advanced to one inter-host piece
  size_t lamport_used_[sched::kLamportBuffers] = {};  // words per slot the last call of each buffer wrote
};

}  // namespace symmar

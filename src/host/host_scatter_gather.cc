// Reduce-scatter and all-gather on the host, in the one-shot pattern: per chunk, every rank
// publishes what its peers need in its staging half, one barrier, then every rank reads from all
// the others. Staging halves alternate as in the one-shot allreduce, so one barrier per chunk
// suffices (a rank that passed barrier k knows every peer finished reading the half chunk k + 1
// overwrites), and these calls share the half bookkeeping with every other collective.
//
// Reduce-scatter, chunk [b, e) of each rank's block: rank p stages its elements [q * n + b, q * n + e)
// for every peer q, at q's place in its half; rank q then reduces its own block's chunk from every
// rank's staging (its own straight from its input), in rank order, so each block's bits are those
// of the allreduce's reduction. All-gather, chunk [b, e) of the block: each rank stages its chunk,
// and every rank copies every rank's chunk to its place in the output.
//
// A send buffer from symmarMemAlloc is not staged: its offset goes out with the start barrier and
// peers read it in place. An all-gather's send buffer of kCrossMemoryBlockBytes or more is not
// staged either where the comm reads peers' processes (cross_memory.h): its address goes out, and
// peers copy their chunks from it with one system call each. No rank may then return (and let its
// caller rewrite that buffer) before every peer has read it: when any rank's input was read in
// place, which every rank learns from the same barrier, the call ends with one more barrier.
//
// Where the comm uses the staging ring (sched::stagingRingShift) a call stages at its slot of the
// ring, as the allreduce does, so that it does not write lines a peer read the call before. A rank
// with several threads (SYMMAR_HOST_THREADS, symmarCommSetHostThreads) splits each copy and
// reduction of 64 KiB a thread or more over them, as the two-shot allreduce does.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "host/cross_memory.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"

namespace symmar {
namespace {

// Smallest send buffer an all-gather has peers read from its process (each read is a system call
// of about 2 us). 2 ranks, float32, EPYC VM of docs/performance/host-scatter-gather.md, against lamport and MPI in the
// same runs: at 8 KiB a rank lamport was 1.8-2.8x ahead of MPI and the process reads 1.25-1.3x; at
// 32 KiB the process reads were 1.14-1.18x MPI in every run, lamport 0.90-1.27x.
constexpr size_t kCrossMemoryBlockBytes = size_t{32} << 10;

// Smallest block an all-gather stages in the staging ring. 2 ranks, float32, staged
// (SYMMAR_HOST_CMA=0), runs with the ring on and off in turns: at 8 KiB blocks the ring cost
// 2.0-2.2 us against 1.5-1.8 in 5 of 5 pairs of runs in the same state; at 16 KiB it was
// 0.96-1.84x as fast, at 32-128 KiB 1.6-3.0x.
constexpr size_t kAllGatherRingMinBytes = size_t{16} << 10;

}  // namespace

symmarResult_t HostBackend::scatterGather(const ScatterGatherCall& c) {
  SYMMAR_CHECK(checkCallable(c.stream));
  if (placement_.hosts > 1) return scatterGatherAcrossHosts(c);  // host_scatter_gather_hosts.cc
  if (world_ == 1) {
    if (c.send != c.recv && c.count > 0) memmove(c.recv, c.send, c.count * c.elem());
    return symmarSuccess;
  }
  if (c.algo == symmarAlgoLamport) return runLamportScatterGather(c);  // host_lamport.cc; count 0 too
  if (c.count == 0) {  // moves nothing, but takes part in call matching like any other call
    return matchCall(callSignature(c));
  }
  return c.coll == Collective::kReduceScatter ? runReduceScatter(c) : runAllGather(c);
}

symmarResult_t HostBackend::runReduceScatter(const ScatterGatherCall& c) {
  const size_t elem = c.elem();
  const size_t chunk = chunkElems(elem) / static_cast<size_t>(world_);  // world blocks' chunks fill a half
  if (chunk == 0) return fail(symmarInvalidArgument, "staging buffer of %zu bytes is too small", heap_->stagingBytes());
  const char* send = static_cast<const char*>(c.send);
  char* recv = static_cast<char*>(c.recv);
  const size_t block = c.count * elem, whole = block * static_cast<size_t>(world_);
  const uint64_t input_offset = symmetricOffset(send, whole);
  bool read_in_place = input_offset != sched::kStagedInput;
  // A half holds world blocks' chunks; its slot of the staging ring, or 0. A peer reads one block's
  // chunk, so the ring starts where that reaches the ring's smallest call: 2 ranks, float32, 8 KiB
  // buffers (4 KiB a block) took 1.0-1.3 us in the ring against 0.6-0.8 us at the half's start;
  // 16 KiB buffers 1.3-1.8x as fast in the ring.
  const size_t blocks = static_cast<size_t>(world_);
  const size_t shift = stagingShift(blocks * std::min(c.count, chunk) * elem, blocks * sched::kStagingRingMinBytes);
  const auto staging = [&](int p, int half) { return heap_->staging(p, half) + shift; };
  for (size_t k = 0; k < sched::numChunks(c.count, chunk); ++k) {
    const sched::Range r = sched::chunkRange(c.count, chunk, k);
    const size_t bytes = r.size() * elem;
    const int half = takeWriteHalf();
    char* staged = staging(rank_, half);
    if (input_offset == sched::kStagedInput) {  // streamed where plain writes were slow lately
      stageChunk((world_ - 1) * bytes, [&](auto copy) {
        for (int q = 0; q < world_; ++q) {
          if (q == rank_) continue;
          char* to = staged + q * bytes;
          const char* from = send + q * block + r.begin * elem;
          inParts(bytes, 1, [&](int, size_t b, size_t n) { copy(to + b, from + b, n); });
        }
      });
    }
    SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, input_offset, k == 0 ? callSignature(c) : 0));
    const uint32_t epoch = sync_->epoch();
    for (int p = 0; p < world_; ++p) {
      const char* input = send;  // this rank's own block: from its input, wherever that is
      if (p != rank_) {  // a peer's input read in place (not this rank's own) asks for the end barrier
        SYMMAR_CHECK(peerInput(p, sync_->peerInputOffset(p, sched::kSlotStart, epoch), whole, elem, &input));
        read_in_place = read_in_place || input != nullptr;
      }
      srcs_[p] = input ? input + rank_ * block + r.begin * elem : staging(p, half) + rank_ * bytes;
    }
    last_read_half_ = half;
    // In place the output chunk is this rank's input chunk: each block is read before it is written.
    inParts(r.size(), elem, [&](int part, size_t b, size_t n) {
      reduceRanks(recv + (r.begin + b) * elem, nullptr, partSources(part, b, elem), world_, n, c.dtype, c.op);
    });
  }
  return read_in_place ? sync_->barrier(sched::kSlotEnd) : symmarSuccess;
}

symmarResult_t HostBackend::runAllGather(const ScatterGatherCall& c) {
  const size_t elem = c.elem();
  const size_t chunk = chunkElems(elem);
  if (chunk == 0) return fail(symmarInvalidArgument, "staging buffer of %zu bytes is too small", heap_->stagingBytes());
  const char* send = static_cast<const char*>(c.send);
  char* recv = static_cast<char*>(c.recv);
  const size_t block = c.count * elem;
  uint64_t input_word = symmetricOffset(send, block);  // published with the start barrier
  if (input_word == sched::kStagedInput && cross_memory_ && block >= kCrossMemoryBlockBytes) {
    input_word = crossMemoryWord(send);
  }
  bool read_in_place = input_word != sched::kStagedInput;
  const size_t shift = stagingShift(std::min(c.count, chunk) * elem, kAllGatherRingMinBytes);  // its slot, or 0
  const auto staging = [&](int p, int half) { return heap_->staging(p, half) + shift; };
  for (size_t k = 0; k < sched::numChunks(c.count, chunk); ++k) {
    const sched::Range r = sched::chunkRange(c.count, chunk, k);
    const size_t bytes = r.size() * elem;
    const int half = takeWriteHalf();
    if (input_word == sched::kStagedInput) {  // streamed where plain writes were slow lately
      char* staged = staging(rank_, half);
      const char* from = send + r.begin * elem;
      stageChunk(bytes, [&](auto copy) {
        inParts(bytes, 1, [&](int, size_t b, size_t n) { copy(staged + b, from + b, n); });
      });
    }
    // The own block needs no peer: copied while the peers stage theirs (in place it is there already).
    char* own = recv + rank_ * block + r.begin * elem;
    if (own != send + r.begin * elem) copyInParts(own, send + r.begin * elem, bytes);
    SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, input_word, k == 0 ? callSignature(c) : 0));
    const uint32_t epoch = sync_->epoch();
    for (int i = 1; i < world_; ++i) {
      const int p = (rank_ + i) % world_;  // the peers in turn from the next rank on: reads spread over them
      char* dst = recv + p * block + r.begin * elem;
      const uint64_t word = sync_->peerInputOffset(p, sched::kSlotStart, epoch);
      if (cross_memory_ && isCrossMemoryWord(word)) {
        read_in_place = true;
        SYMMAR_CHECK(readPeerProcess(p, dst, crossMemoryAddress(word) + r.begin * elem, bytes));
        continue;
      }
      const char* input = nullptr;  // a tagged word where the comm reads no processes is refused here
      SYMMAR_CHECK(peerInput(p, word, block, elem, &input));
      read_in_place = read_in_place || input != nullptr;
      copyInParts(dst, input ? input + r.begin * elem : staging(p, half), bytes);
    }
    last_read_half_ = half;
  }
  return read_in_place ? sync_->barrier(sched::kSlotEnd) : symmarSuccess;
}

}  // namespace symmar

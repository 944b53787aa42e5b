// The host symmetric heap: one shared segment per rank (bootstrap/shared_segments.h), mapped by
// every local rank. Layout of a segment: header (state word, pid) | signal pad | staging buffer |
// lamport buffers | user heap (symmarMemAlloc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/shared_segments.h"
#include "core/schedule.h"
#include "symmar/symmar.h"

namespace symmar {

/// What a rank's state word says to its peers.
enum SegmentState : uint32_t {
  kSegmentAlive = 0,
  /// The rank returned an error for the call whose barrier had epoch failed_epoch (and whose number
  /// in the comm's call sequence is failed_call): its flags from that epoch on, and its lamport data
  /// from that call on, are no contribution, so a peer that meets them must fail that call too
  /// (never complete it on the failed rank's data). Calls it finished before stay good.
  kSegmentFailed = 1,
  /// The rank destroyed a healthy comm: the flags it raised before leaving are still good.
  kSegmentLeft = 2,
};

struct SegmentHeader {
  uint32_t state;         // SegmentState, so waiting peers stop at once (published with release)
  int32_t pid;
  uint32_t failed_epoch;  // with kSegmentFailed: the first barrier epoch this rank did not complete
  uint32_t failed_call;   // with kSegmentFailed: the first call (comm-wide number) this rank did not complete
  uint64_t self_address;  // this header's address in the rank's own process (cross_memory.h's probe)
  uint64_t pid_ns;        // the rank's pid namespace (pidNamespaceId): whose /proc the pid names
};

/// This process's pid namespace, from the identity of /proc/self/ns/pid; 0 where it cannot be
/// read (no /proc). A peer's pid names a process here only where its namespace is this one, and
/// its liveness can be read only where /proc is there: the barriers look a peer up only then.
uint64_t pidNamespaceId();

class ShmHeap {
 public:
  static constexpr size_t kHeaderBytes = 4096;
  ShmHeap() = default;
  ~ShmHeap();
  ShmHeap(const ShmHeap&) = delete;
  ShmHeap& operator=(const ShmHeap&) = delete;

  /// Collective: creates this rank's segment, exchanges descriptors and maps every peer's.
  /// Flags start at epoch_start.
  symmarResult_t create(Bootstrap& bootstrap, uint64_t nonce, size_t staging_bytes, size_t heap_bytes,
                        uint32_t epoch_start, int timeout_ms);

  /// True once create() mapped every segment; the accessors below need it.
  bool mapped() const { return !bases_.empty() && bases_[0] != nullptr && bases_.back() != nullptr; }
  char* base(int rank) const { return bases_[rank]; }
  SegmentHeader* header(int rank) const { return reinterpret_cast<SegmentHeader*>(bases_[rank]); }
  uint32_t* flag(int rank, int block, int slot) const {
    return reinterpret_cast<uint32_t*>(bases_[rank] + kHeaderBytes + sched::flagOffset(block, slot));
  }
  char* staging(int rank, int half) const {
    return bases_[rank] + stagingOffset() + sched::stagingHalfOffset(staging_bytes_, half);
  }
  char* userBase(int rank) const { return bases_[rank] + userOffset(); }
  /// The word where a lamport slot's header starts (the slot's last vector); its last word is
  /// written last, so a non-empty one means the header arrived.
  static constexpr size_t kLamportHeaderWord = sched::kLamportHeaderVec * 4;
  /// Word 0 of slot `from` of lamport buffer `buffer` in rank's segment.
  uint32_t* lamportSlot(int rank, int buffer, int from) const {
    return reinterpret_cast<uint32_t*>(bases_[rank] + lamportOffset() + sched::lamportSlotOffset(buffer, from, world_));
  }
  size_t stagingBytes() const { return staging_bytes_; }
  /// Maps the pages of the first `bytes` of both staging halves of `rank` into this process,
  /// reading one byte of each, so that the first calls that stage there take no page faults. A page
  /// nobody touched before is allocated then, zeroed, on the memory node of the CPU that reads it:
  /// a rank maps its own staging before its peers map it (host_backend.cc), so that its staging
  /// lies next to the rank that writes it.
  void mapStagingPages(size_t bytes, int rank) const;
  size_t heapBytes() const { return heap_bytes_; }
  size_t segmentBytes() const { return segment_bytes_; }

 private:
  size_t stagingOffset() const { return kHeaderBytes + sched::kSignalPadBytes; }
  size_t lamportOffset() const { return (stagingOffset() + staging_bytes_ + 127) / 128 * 128; }
  size_t userOffset() const { return (lamportOffset() + sched::lamportAreaBytes(world_) + 4095) / 4096 * 4096; }

  SharedSegments segments_;
  std::vector<char*> bases_;  ///< segments_' bases once every rank mapped them
  size_t segment_bytes_ = 0;
  size_t staging_bytes_ = 0;
  size_t heap_bytes_ = 0;
  int world_ = 1;
};

}  // namespace symmar

// The inter-host stage of a hierarchical host comm. Each rank holds its host's partial result for
// some elements; the ranks with the same local index, one per host, combine their partials through
// the engine's exchange (MPI, or whatever the engine installed), reducing in host order so every
// rank of the comm computes the same bits. Two rounds: a reduce-scatter (host h receives sub-slice
// h of every partial and reduces it) and an all-gather of the reduced sub-slices, 2(H-1)/H of the
// partial on the wire per rank. Small partials take the same two rounds although one (every host
// sends its whole partial to every other) would carry them: a host's all-gather record is also its
// receipt. A rank succeeds only after every host sent it something written after receiving this
// rank's data, so a rank that arrives after its peers gave up (their first-round records are
// delivered to it all the same, as MPI delivers a send it cannot cancel) waits for second-round
// records that never come and fails the call too, instead of completing a call they failed.
// Every record carries the call's signature, a sequence number and its length, checked before any
// data is used: hosts that made different calls fail the call on every rank.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "symmar/symmar.h"

namespace symmar {

class InterHost {
 public:
  /// hosts: ranks taking part (one per host); host: this rank's place among them; rank: this
  /// rank's rank in the comm (its records carry it, so messages name the comm's ranks).
  InterHost(const InterHostCarrier& carrier, int hosts, int host, int rank, int timeout_ms);
  ~InterHost();
  InterHost(const InterHost&) = delete;
  InterHost& operator=(const InterHost&) = delete;

  /// A run of the partial's elements and where it is written (inside the round's send records, so
  /// the partial travels without a copy).
  struct Piece {
    size_t begin, count;
    void* dst;
  };
  /// Where the next combine() of count elements of dtype wants its partial: one piece per host
  /// (empty ones when count is below the number of hosts). Valid until the next call.
  const std::vector<Piece>& pieces(size_t count, symmarDataType_t dtype);
  /// Reduces the partial written at pieces() with the other hosts' partials of the same call
  /// (signature sig) in host order, into dst and, unless null, dst2 (count elements each). count 0
  /// still exchanges the signature (a host that skipped the call is caught).
  symmarResult_t combine(void* dst, void* dst2, size_t count, symmarDataType_t dtype, symmarRedOp_t op, uint64_t sig);

  // Reduce-scatter and all-gather between hosts: one round that moves the data, then a round of
  // receipts (records without data), so a rank succeeds only once every host has taken its data.
  /// Where the next scatter() of count elements wants this host's partial of each host's block
  /// (piece h: host h's; every piece count elements long). Valid until the next call.
  const std::vector<Piece>& blocks(size_t count, symmarDataType_t dtype);
  /// Sends block h to host h and reduces every host's partial of this host's block, in host order,
  /// into dst (count elements).
  symmarResult_t scatter(void* dst, size_t count, symmarDataType_t dtype, symmarRedOp_t op, uint64_t sig);
  /// Sends count elements of src to every host; gathered(h) then holds host h's.
  symmarResult_t gather(const void* src, size_t count, symmarDataType_t dtype, uint64_t sig);
  const void* gathered(int h) const;

 private:
  struct Header {
    uint64_t sig;
    uint64_t seq;
    uint64_t bytes;  // the record's data bytes
    uint64_t rank;   // the sender's rank in the comm (for messages); also keeps the data 16-byte aligned
  };
  /// Bytes of one record of a round: a header and up to span elements, padded to 16 bytes.
  static size_t recordBytes(size_t span, size_t elem);
  /// One exchange: send[h] to host h, host h's record for this rank into recv; checks every
  /// record's header (data bytes expected[h]).
  symmarResult_t exchange(const std::vector<const void*>& send, size_t record, uint64_t sig,
                          const std::vector<size_t>& expected, std::vector<unsigned char>* recv);
  void writeHeader(unsigned char* record, uint64_t sig, size_t bytes) const;
  /// The round of receipts: every host's record is written after it took this rank's data.
  symmarResult_t receipts(uint64_t sig);

  InterHostCarrier carrier_;
  const int hosts_;
  const int host_;
  const int rank_;
  const int timeout_ms_;
  uint64_t seq_ = 0;        // rounds exchanged: every host counts the same
  bool abandoned_ = false;  // an exchange failed: the engine may still touch the buffers
  size_t span_ = 0;         // elements per piece of the current call
  std::vector<Piece> pieces_;
  std::vector<unsigned char> send_, recv_, reduced_, receipt_, receipts_;
  size_t gathered_record_ = 0;  // bytes per record of the last gather()
  std::vector<const void*> sends_, srcs_;
  std::vector<size_t> expected_;
};

}  // namespace symmar

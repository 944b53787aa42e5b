// An inter-host engine for ranks forked on one machine that pretend to sit on several hosts
// (SYMMAR_HOST_ID): records travel through one-slot mailboxes in memory the parent shared before
// fork, first in first out per ordered pair of ranks, as MPI's point-to-point messages do. A
// record left behind by an exchange that gave up is read by the peer's next receive, as MPI would
// deliver it: the library, not the carrier, must notice. Bounded by the timeout it is given.
#pragma once
#include <cstddef>

#include "mp/mp_util.h"
#include "symmar/symmar.h"

namespace fault {

class ShmInterHost {
 public:
  /// Largest record one exchange may carry.
  static constexpr size_t kSlotBytes = 64 << 10;

  /// Mailboxes for every ordered pair of world ranks; create before fork. Hosts hold consecutive
  /// ranks (SYMMAR_HOST_ID = rank / ranks-per-host), or with interleaved take ranks in turn
  /// (SYMMAR_HOST_ID = rank % hosts).
  explicit ShmInterHost(int world, bool interleaved = false);

  /// Collective over the comm: installs the engine on this rank (symmarCommSetInterHost).
  symmarResult_t install(symmarComm_t comm, int rank);

 private:
  struct Endpoint;
  static symmarResult_t exchange(const void* const* sendbufs, void* recvbuf, size_t bytes, int timeout_ms, void* user);
  uint64_t* channel(int from, int to);  // [0]: full flag, [1]: bytes, then the record

  int world_;
  bool interleaved_;
  mp::SharedWords words_;
};

}  // namespace fault

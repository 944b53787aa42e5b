// The inter-host stage of a hierarchical host comm: this rank's partial result goes to the ranks
// with the same local index on the other hosts through the engine's allgather (MPI, or whatever the
// engine installed), and every rank reduces the gathered partials in host order, so all ranks of
// the comm compute the same bits. Each record carries the call's signature and a sequence number,
// checked before any data is used: hosts that made different calls fail the call on every rank.
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
  /// hosts: ranks taking part (one per host); host: this rank's place among them.
  InterHost(const InterHostCarrier& carrier, int hosts, int host, int timeout_ms);
  ~InterHost();
  InterHost(const InterHost&) = delete;
  InterHost& operator=(const InterHost&) = delete;

  const std::string& name() const { return carrier_.name; }
  /// Where this rank's partial of count elements is written before combine() (no copy then);
  /// valid until the next call.
  void* partial(size_t count, symmarDataType_t dtype);
  /// Reduces the count elements of this rank's partial (written at partial()) with the other
  /// hosts' partials of the same call (signature sig) in host order, into dst and, unless null,
  /// dst2. count 0 still exchanges the signature (a host that skipped the call is caught).
  symmarResult_t combine(void* dst, void* dst2, size_t count, symmarDataType_t dtype, symmarRedOp_t op, uint64_t sig);

 private:
  struct Header {
    uint64_t sig;
    uint64_t seq;
    uint64_t bytes;
    uint64_t pad;  // keeps the payload 16-byte aligned in every record
  };

  InterHostCarrier carrier_;
  const int hosts_;
  const int host_;
  const int timeout_ms_;
  uint64_t seq_ = 0;  // exchanges made: every host counts the same
  std::vector<unsigned char> send_, recv_;
  std::vector<const void*> srcs_;
};

}  // namespace symmar

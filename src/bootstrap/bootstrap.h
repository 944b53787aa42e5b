// How ranks meet and exchange small records: an allgather (TCP star, engine callback, or MPI
// through the callback) plus the fd passing that local ranks use to share memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/bootstrap_api.h"
#include "symmar/symmar.h"

namespace symmar {

/// Star over TCP: rank 0 accepts every other rank on the listener named in the id.
symmarResult_t createTcpBootstrap(const symmarUniqueId& id, int rank, int nranks, int timeout_ms,
                                  std::unique_ptr<Bootstrap>* out);
/// Engine-supplied allgather callback.
std::unique_ptr<Bootstrap> createExternalBootstrap(int rank, int nranks, symmarAllGatherFn fn, void* user);
/// Fills a fresh unique id and starts its listener (kept open for rank 0 of this process or its children).
symmarResult_t makeUniqueId(symmarUniqueId* id);

/// Identity of this process for locality checks: ranks share memory only with the same host id.
struct ProcessIdentity {
  uint64_t host_hash;     // hostname + boot id, or SYMMAR_HOST_ID
  uint64_t machine_hash;  // hostname + boot id always: the processes that share this machine's cores
  int32_t pid;
  int32_t pad;
};
ProcessIdentity selfIdentity();

/// Exchanges one file descriptor with every other rank (all ranks must be local): fds[r] is rank
/// r's descriptor, duplicated into this process (fds[rank] = own_fd, not duplicated). The caller
/// closes the received ones. nonce scopes the socket names to one comm.
symmarResult_t exchangeFds(Bootstrap& bootstrap, uint64_t nonce, int own_fd, int timeout_ms, std::vector<int>* fds);

}  // namespace symmar

// The allreduce behind symmarAllReduce*, for entry points of which it is one step (api_coll.cc),
// and how every collective hands a call to the host fallback.
#pragma once
#include "api/comm.h"
#include "core/call.h"
#include "core/error.h"

namespace symmar {

/// A call the host fallback (MPI) moves by run(). The fallback pairs calls by order alone, so the
/// call meets its peers' first (Backend::matchCall); count 0, for which it would make no call at
/// all, ends there. fn names the entry point in messages.
template <typename Run>
symmarResult_t runOnFallback(symmarComm* comm, uint64_t signature, size_t count, void* stream, const char* fn,
                             Run&& run) {
  if (stream != nullptr) return fail(symmarInvalidArgument, "%s: the mpi fallback takes no stream (NULL)", fn);
  SYMMAR_CHECK(comm->backend->matchCall(signature));
  if (count == 0) return symmarSuccess;
  const symmarResult_t res = run();
  if (res != symmarSuccess && threadLastError().empty()) fail(res, "%s: the mpi fallback failed", fn);
  return res;
}

/// One allreduce on comm: buffers checked (count > 0), planned where call.algo is symmarAlgoAuto,
/// then run by the backend, or by the host fallback once the call has met its peers' (matchCall).
/// fn names the entry point in messages. A failure of the comm is recorded on it.
symmarResult_t runAllReduce(symmarComm* comm, AllReduceCall call, const char* fn);

}  // namespace symmar

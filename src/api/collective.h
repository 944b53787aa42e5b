// The allreduce behind symmarAllReduce*, for entry points of which it is one step (api_coll.cc).
#pragma once
#include "api/comm.h"
#include "core/call.h"

namespace symmar {

/// One allreduce on comm: buffers checked (count > 0), planned where call.algo is symmarAlgoAuto,
/// then run by the backend, or by the host fallback once the call has met its peers' (matchCall).
/// fn names the entry point in messages. A failure of the comm is recorded on it.
symmarResult_t runAllReduce(symmarComm* comm, AllReduceCall call, const char* fn);

}  // namespace symmar

// What a comm's executor provides. One implementation per backend: host (shared memory, CPU
// threads) and cuda (VMM heap, kernels, NCCL).
#pragma once
#include <cstddef>

#include "symmar/symmar.h"

namespace symmar {

class Backend {
 public:
  virtual ~Backend() = default;
  /// Runs one allreduce with an algorithm the planner found available. Arguments are validated.
  virtual symmarResult_t allReduce(const void* send, void* recv, size_t count, symmarDataType_t dtype,
                                   symmarRedOp_t op, symmarAlgo_t algo, void* stream) = 0;
  virtual symmarResult_t memAlloc(size_t bytes, void** ptr) = 0;
  virtual symmarResult_t memFree(void* ptr) = 0;
  /// Asynchronous status (a device-side timeout); symmarSuccess if none.
  virtual symmarResult_t asyncError() { return symmarSuccess; }
  /// Fallback algorithms this backend serves itself (bits of symmarAlgoNccl).
  virtual uint32_t fallbacks() const { return 0; }
  /// Adopts an engine NCCL communicator (GPU backends only).
  virtual symmarResult_t adoptNccl(void* nccl_comm) {
    (void)nccl_comm;
    return symmarInvalidUsage;
  }
};

}  // namespace symmar

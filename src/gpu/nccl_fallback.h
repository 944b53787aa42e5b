// The NCCL fallback: libnccl.so.2 loaded at run time (SYMMAR_NCCL_LIB overrides the name), with a
// communicator of its own created with the comm, or one adopted from the engine. Declares the few
// NCCL types it needs itself, so nothing links against NCCL.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/backend.h"

namespace symmar {
namespace gpu {

class NcclFallback {
 public:
  NcclFallback() = default;
  NcclFallback(const NcclFallback&) = delete;
  NcclFallback& operator=(const NcclFallback&) = delete;
  ~NcclFallback();

  /// Loads the library (once). False, with an INFO line, when it cannot be loaded.
  bool load();
  bool loaded() const { return lib_ != nullptr; }
  /// Uses an engine's ncclComm_t (not owned). Replaces (and destroys) an own communicator.
  symmarResult_t adopt(void* nccl_comm);
  /// Collective: creates the comm's own NCCL communicator (at comm creation: creating it on a first
  /// call would block inside a graph capture, or deadlock one thread that issues every rank's calls).
  symmarResult_t create(const BackendContext& ctx) { return ensureComm(ctx); }
  /// ncclAllReduce on the comm's NCCL communicator, creating it first if needed (collective then:
  /// every rank reaches it through the same planned call). Any dtype the API knows.
  symmarResult_t allReduce(const BackendContext& ctx, const void* send, void* recv, size_t count, symmarDataType_t dtype,
                           symmarRedOp_t op, cudaStream_t stream);
  /// ncclReduceScatter or ncclAllGather (call.coll) on the comm's NCCL communicator, as allReduce.
  symmarResult_t scatterGather(const BackendContext& ctx, const ScatterGatherCall& call);
  /// Collective over this communicator (which must exist): ncclCommSplit by color, ranked by key,
  /// into out (loaded, owning the new communicator). symmarUnsupported when this NCCL has no
  /// ncclCommSplit (before 2.18).
  symmarResult_t split(int color, int key, NcclFallback* out);
  /// Set when the comm failed: teardown aborts instead of waiting for outstanding work.
  void markFailed() { failed_ = true; }
  /// ncclGroupStart (start) or ncclGroupEnd of the NCCL already loaded in this process; *called
  /// says whether NCCL was there (nothing to group otherwise).
  static symmarResult_t group(bool start, bool* called);

 private:
  symmarResult_t ensureComm(const BackendContext& ctx);
  /// Loaded, dtype known to NCCL (*type), communicator made (never inside a graph capture).
  symmarResult_t prepareCall(const BackendContext& ctx, symmarDataType_t dtype, cudaStream_t stream, int* type);
  symmarResult_t ncclFailure(int res, const char* what) const;

  // Minimal mirrors of nccl.h: an opaque comm, a 128-byte unique id, int results and enums.
  struct UniqueId {
    char internal[128];
  };
  using GetUniqueIdFn = int (*)(UniqueId*);
  using CommInitRankFn = int (*)(void**, int, UniqueId, int);
  using AllReduceFn = int (*)(const void*, void*, size_t, int, int, void*, cudaStream_t);
  using AllGatherFn = int (*)(const void*, void*, size_t, int, void*, cudaStream_t);
  using CommFn = int (*)(void*);
  using ErrorStringFn = const char* (*)(int);

  void* lib_ = nullptr;
  GetUniqueIdFn get_unique_id_ = nullptr;
  CommInitRankFn comm_init_rank_ = nullptr;
  AllReduceFn all_reduce_ = nullptr;
  AllReduceFn reduce_scatter_ = nullptr;  // the same parameters, recvcount in place of count
  AllGatherFn all_gather_ = nullptr;
  CommFn comm_destroy_ = nullptr;
  CommFn comm_abort_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  void* comm_ = nullptr;
  bool owned_ = false;
  bool failed_ = false;
};

}  // namespace gpu
}  // namespace symmar

#include "gpu/nccl_fallback.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "core/names.h"
#include "core/log.h"

namespace symmar {
namespace gpu {
namespace {

// Values of nccl.h's enums (stable since NCCL 2.0; bf16 since 2.10).
constexpr int kNcclSuccess = 0;
constexpr int kNcclInt32 = 2;
constexpr int kNcclFloat16 = 6;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclFloat64 = 8;
constexpr int kNcclBfloat16 = 9;
constexpr int kNcclSum = 0;
constexpr int kNcclMax = 2;
constexpr int kNcclMin = 3;

int ncclType(symmarDataType_t d) {
  switch (d) {
    case symmarFloat32: return kNcclFloat32;
    case symmarFloat16: return kNcclFloat16;
    case symmarBfloat16: return kNcclBfloat16;
    case symmarInt32: return kNcclInt32;
    case symmarFloat64: return kNcclFloat64;
    default: return -1;
  }
}
int ncclOp(symmarRedOp_t o) { return o == symmarSum ? kNcclSum : o == symmarMax ? kNcclMax : kNcclMin; }

}  // namespace

NcclFallback::~NcclFallback() {
  if (comm_ && owned_) (failed_ && comm_abort_ ? comm_abort_ : comm_destroy_)(comm_);
  // The library stays loaded: NCCL keeps process-wide state that must not be unmapped.
}

bool NcclFallback::load() {
  if (lib_) return true;
  const char* name = envRaw("SYMMAR_NCCL_LIB");
  if (!name) name = "libnccl.so.2";
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    SYMMAR_INFO(kSubsysGpu, "NCCL fallback unavailable: %s", err ? err : name);
    return false;
  }
  get_unique_id_ = reinterpret_cast<GetUniqueIdFn>(dlsym(lib, "ncclGetUniqueId"));
  comm_init_rank_ = reinterpret_cast<CommInitRankFn>(dlsym(lib, "ncclCommInitRank"));
  all_reduce_ = reinterpret_cast<AllReduceFn>(dlsym(lib, "ncclAllReduce"));
  reduce_scatter_ = reinterpret_cast<AllReduceFn>(dlsym(lib, "ncclReduceScatter"));
  all_gather_ = reinterpret_cast<AllGatherFn>(dlsym(lib, "ncclAllGather"));
  comm_destroy_ = reinterpret_cast<CommFn>(dlsym(lib, "ncclCommDestroy"));
  comm_abort_ = reinterpret_cast<CommFn>(dlsym(lib, "ncclCommAbort"));
  error_string_ = reinterpret_cast<ErrorStringFn>(dlsym(lib, "ncclGetErrorString"));
  if (!get_unique_id_ || !comm_init_rank_ || !all_reduce_ || !comm_destroy_ || !error_string_) {
    SYMMAR_WARN(kSubsysGpu, "NCCL fallback unavailable: %s lacks a required symbol", name);
    dlclose(lib);
    return false;
  }
  lib_ = lib;
  SYMMAR_INFO(kSubsysGpu, "NCCL fallback loaded from %s", name);
  return true;
}

symmarResult_t NcclFallback::group(bool start, bool* called) {
  *called = false;
  const char* name = envRaw("SYMMAR_NCCL_LIB");
  // Only an NCCL already loaded can have calls to group: RTLD_NOLOAD never loads it here.
  void* lib = dlopen(name ? name : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) return symmarSuccess;
  using GroupFn = int (*)();
  auto fn = reinterpret_cast<GroupFn>(dlsym(lib, start ? "ncclGroupStart" : "ncclGroupEnd"));
  auto err = reinterpret_cast<ErrorStringFn>(dlsym(lib, "ncclGetErrorString"));
  symmarResult_t out = symmarSuccess;
  if (fn) {
    *called = true;
    const int res = fn();
    if (res != kNcclSuccess) {
      out = fail(symmarNcclError, "%s failed: %s", start ? "ncclGroupStart" : "ncclGroupEnd",
                 err ? err(res) : "unknown NCCL error");
    }
  }
  dlclose(lib);  // drops only the reference RTLD_NOLOAD took
  return out;
}

symmarResult_t NcclFallback::ncclFailure(int res, const char* what) const {
  return fail(symmarNcclError, "%s failed: %s", what, error_string_ ? error_string_(res) : "unknown NCCL error");
}

symmarResult_t NcclFallback::adopt(void* nccl_comm) {
  if (!lib_) return fail(symmarNcclError, "cannot adopt an NCCL communicator: libnccl could not be loaded");
  if (!nccl_comm) return fail(symmarInvalidArgument, "null NCCL communicator");
  if (comm_ && owned_) comm_destroy_(comm_);
  comm_ = nccl_comm;
  owned_ = false;
  return symmarSuccess;
}

symmarResult_t NcclFallback::split(int color, int key, NcclFallback* out) {
  if (!lib_ || !comm_) return fail(symmarUnsupported, "no NCCL communicator to split");
  // ncclCommSplit(comm, color, key, &newcomm, config): NULL config inherits the parent's.
  using SplitFn = int (*)(void*, int, int, void**, void*);
  auto split_fn = reinterpret_cast<SplitFn>(dlsym(lib_, "ncclCommSplit"));
  if (!split_fn) return fail(symmarUnsupported, "this NCCL has no ncclCommSplit (NCCL 2.18 or later has)");
  void* c = nullptr;
  const int res = split_fn(comm_, color, key, &c, nullptr);
  if (res != kNcclSuccess) return ncclFailure(res, "ncclCommSplit");
  if (!out->load()) {
    comm_destroy_(c);
    return fail(symmarNcclError, "libnccl could not be loaded for the split communicator");
  }
  out->comm_ = c;
  out->owned_ = true;
  return symmarSuccess;
}

symmarResult_t NcclFallback::ensureComm(const BackendContext& ctx) {
  if (comm_) return symmarSuccess;
  struct Record {
    int32_t ok;
    UniqueId id;
  };
  Record mine{};
  mine.ok = 1;
  int res = kNcclSuccess;
  if (ctx.rank == 0) {
    res = get_unique_id_(&mine.id);
    mine.ok = res == kNcclSuccess;
  }
  std::vector<Record> all;
  SYMMAR_CHECK(gatherAll(*ctx.bootstrap, mine, &all));
  if (!all[0].ok) {
    return ctx.rank == 0 ? ncclFailure(res, "ncclGetUniqueId")
                         : fail(symmarNcclError, "rank 0 could not create an NCCL id");
  }
  void* c = nullptr;
  res = comm_init_rank_(&c, ctx.nranks, all[0].id, ctx.rank);
  if (res != kNcclSuccess) return ncclFailure(res, "ncclCommInitRank");
  comm_ = c;
  owned_ = true;
  SYMMAR_INFO(kSubsysGpu, "created an NCCL communicator for the fallback (%d ranks)", ctx.nranks);
  return symmarSuccess;
}

symmarResult_t NcclFallback::prepareCall(const BackendContext& ctx, symmarDataType_t dtype, cudaStream_t stream,
                                         int* type) {
  if (!lib_) return fail(symmarUnsupported, "the NCCL fallback is not available (libnccl not loaded)");
  *type = ncclType(dtype);
  if (*type < 0) return fail(symmarInvalidArgument, "data type %s has no NCCL equivalent", dtypeName(dtype));
  if (!comm_) {
    // Creating the NCCL communicator is collective and synchronous: it cannot happen inside a
    // CUDA graph capture (the capture would break or silently lose the NCCL call).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone) {
      return fail(symmarInvalidUsage, "the NCCL fallback's first call is inside a CUDA graph capture: make one eager "
                  "call that NCCL serves (or symmarCommAdoptNccl) before capturing");
    }
  }
  return ensureComm(ctx);
}

symmarResult_t NcclFallback::allReduce(const BackendContext& ctx, const void* send, void* recv, size_t count,
                                       symmarDataType_t dtype, symmarRedOp_t op, cudaStream_t stream) {
  int type = 0;
  SYMMAR_CHECK(prepareCall(ctx, dtype, stream, &type));
  int res = all_reduce_(send, recv, count, type, ncclOp(op), comm_, stream);
  if (res != kNcclSuccess) return ncclFailure(res, "ncclAllReduce");
  return symmarSuccess;
}

symmarResult_t NcclFallback::scatterGather(const BackendContext& ctx, const ScatterGatherCall& c) {
  int type = 0;
  cudaStream_t stream = static_cast<cudaStream_t>(c.stream);
  SYMMAR_CHECK(prepareCall(ctx, c.dtype, stream, &type));
  const bool scatter = c.coll == Collective::kReduceScatter;
  if (scatter ? !reduce_scatter_ : !all_gather_) {
    return fail(symmarUnsupported, "this libnccl has no %s", scatter ? "ncclReduceScatter" : "ncclAllGather");
  }
  const int res = scatter ? reduce_scatter_(c.send, c.recv, c.count, type, ncclOp(c.op), comm_, stream)
                          : all_gather_(c.send, c.recv, c.count, type, comm_, stream);
  if (res != kNcclSuccess) return ncclFailure(res, scatter ? "ncclReduceScatter" : "ncclAllGather");
  return symmarSuccess;
}

}  // namespace gpu
}  // namespace symmar

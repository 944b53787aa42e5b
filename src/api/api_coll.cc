// Collective entry points: argument checks, planning, dispatch to the backend.
#include <cstdint>
#include <string>
#include <vector>

#include "api/checks.h"
#include "api/collective.h"
#include "api/guard.h"
#include "gpu/gpu_entry.h"
#include "core/names.h"
#include "plan/planner.h"

using namespace symmar;

namespace {

symmarAlgo_t commPlan(symmarComm* comm, size_t count, symmarDataType_t dtype, symmarRedOp_t op) {
  return planRequest(comm->row(), comm->topo, comm->fallbacks(), count, dtype, op);
}

/// This thread's open groups: for each, whether NCCL's group was opened with it (NCCL may have
/// been loaded in between, so each level remembers its own).
thread_local std::vector<bool> t_groups;

}  // namespace

symmarResult_t symmar::runAllReduce(symmarComm* comm, AllReduceCall call, const char* fn) {
  const size_t count = call.count;
  const symmarDataType_t dtype = call.dtype;
  const symmarRedOp_t op = call.op;
  symmarAlgo_t& algo = call.algo;
  // Count 0 is a successful call that moves no data (buffers may be NULL); backends that can
  // check call matching still take part in it (docs/integration.md, failure semantics).
  if (count > 0) SYMMAR_CHECK(checkBuffers(call.send, call.recv, count, dtype, fn));
  if (algo == symmarAlgoAuto) {
    const uint32_t fallbacks = comm->fallbacks();
    algo = planRequest(comm->row(), comm->topo, fallbacks, count, dtype, op,
                       comm->available.of(comm->topo, {dtype, op, 0}, fallbacks));
    if (algo == symmarAlgoAuto) {
      return fail(symmarUnsupported, "%s: no algorithm can serve %zu x %s %s on this comm (link %s, no fallback)", fn,
                  count, dtypeName(dtype), opName(op), linkName(comm->topo.link));
    }
  } else if (const Refusal why = refusalOf(algo, comm->topo, {dtype, op, count * symmarTypeSize(dtype)},
                                           comm->fallbacks());
             why != Refusal::kNone) {
    const std::string limit = why == Refusal::kTooLarge
                                  ? ", " + std::to_string(algorithmTraits(algo).max_bytes) + " bytes at most"
                                  : std::string();
    return fail(symmarUnsupported, "%s: algorithm %s cannot serve %zu x %s %s on this comm: %s (link %s, cc %d.%d%s)",
                fn, symmarAlgoName(algo), count, dtypeName(dtype), opName(op), refusalText(why),
                linkName(comm->topo.link), comm->topo.cc_major, comm->topo.cc_minor, limit.c_str());
  }
  symmarResult_t res = symmarSuccess;
  if (algo == symmarAlgoMpi) {  // the engine's or libsymmar_mpi's fallback, held by the comm
    res = runOnFallback(comm, callSignature(call), count, call.stream, fn, [&] {
      return comm->fallback_fn(call.send, call.recv, count, dtype, op, comm->fallback_user);
    });
  } else {
    res = comm->backend->allReduce(call);
  }
  noteFailure(comm, res);
  return res;
}

extern "C" {

symmarResult_t symmarGroupStart(void) {
  return guarded(nullptr, [&] {
    bool called = false;
    SYMMAR_CHECK(ncclGroupCall(true, &called));
    t_groups.push_back(called);
    return symmarSuccess;
  });
}

symmarResult_t symmarGroupEnd(void) {
  return guarded(nullptr, [&] {
    if (t_groups.empty()) return fail(symmarInvalidUsage, "symmarGroupEnd without a symmarGroupStart on this thread");
    const bool called = t_groups.back();
    t_groups.pop_back();
    bool ended = false;
    if (called) SYMMAR_CHECK(ncclGroupCall(false, &ended));
    return symmarSuccess;
  });
}

symmarResult_t symmarAllReduce(const void* sendbuf, void* recvbuf, size_t count, symmarDataType_t dtype,
                               symmarRedOp_t op, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    SYMMAR_CHECK(checkRequest(count, rawEnum(dtype), rawEnum(op), "symmarAllReduce"));
    return runAllReduce(comm, {sendbuf, recvbuf, count, dtype, op, symmarAlgoAuto, stream}, "symmarAllReduce");
  });
}

symmarResult_t symmarAllReduceAlgo(const void* sendbuf, void* recvbuf, size_t count, symmarDataType_t dtype,
                                   symmarRedOp_t op, symmarAlgo_t algo, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    SYMMAR_CHECK(checkRequest(count, rawEnum(dtype), rawEnum(op), "symmarAllReduceAlgo"));
    if (!validAlgo(rawEnum(algo))) {
      return fail(symmarInvalidArgument, "symmarAllReduceAlgo: invalid algorithm %d", rawEnum(algo));
    }
    return runAllReduce(comm, {sendbuf, recvbuf, count, dtype, op, algo, stream}, "symmarAllReduceAlgo");
  });
}

symmarResult_t symmarCommPlan(symmarComm_t comm, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                              symmarAlgo_t* algo) {
  return guardedCollective(comm, [&] {
    if (!algo) return fail(symmarInvalidArgument, "symmarCommPlan: algo is NULL");
    SYMMAR_CHECK(checkRequest(count, rawEnum(dtype), rawEnum(op), "symmarCommPlan"));
    *algo = commPlan(comm, count, dtype, op);
    if (*algo == symmarAlgoAuto) return fail(symmarUnsupported, "symmarCommPlan: no algorithm can serve this request");
    return symmarSuccess;
  });
}

symmarResult_t symmarMemAlloc(symmarComm_t comm, size_t bytes, void** ptr) {
  return guardedCollective(comm, [&] {
    if (!ptr) return fail(symmarInvalidArgument, "symmarMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (bytes == 0) return fail(symmarInvalidArgument, "symmarMemAlloc: bytes is 0");
    symmarResult_t res = comm->backend->memAlloc(bytes, ptr);
    noteFailure(comm, res);
    return res;
  });
}

symmarResult_t symmarMemFree(symmarComm_t comm, void* ptr) {
  return guardedCollective(comm, [&] {
    if (!ptr) return fail(symmarInvalidArgument, "symmarMemFree: ptr is NULL");
    symmarResult_t res = comm->backend->memFree(ptr);
    noteFailure(comm, res);
    return res;
  });
}

}  // extern "C"

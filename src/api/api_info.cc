// Entry points that need no comm: names, version, the pure planner.
#include <cstdint>

#include "api/checks.h"
#include "api/guard.h"
#include "core/names.h"
#include "plan/planner.h"

using namespace symmar;

extern "C" {

const char* symmarGetErrorString(symmarResult_t result) {
  switch (rawEnum(result)) {
    case symmarSuccess: return "symmarSuccess";
    case symmarInvalidArgument: return "symmarInvalidArgument";
    case symmarInvalidUsage: return "symmarInvalidUsage";
    case symmarUnsupported: return "symmarUnsupported";
    case symmarSystemError: return "symmarSystemError";
    case symmarCudaError: return "symmarCudaError";
    case symmarNcclError: return "symmarNcclError";
    case symmarTimeout: return "symmarTimeout";
    case symmarPeerFailure: return "symmarPeerFailure";
    case symmarOutOfMemory: return "symmarOutOfMemory";
    case symmarInternalError: return "symmarInternalError";
    default: return "unknown result";
  }
}

const char* symmarGetLastError(symmarComm_t comm) {
  if (!comm) return threadLastError().c_str();
  std::lock_guard<std::mutex> lock(comm->error_mutex);
  return comm->last_error.c_str();
}

symmarResult_t symmarGetVersion(int* version) {
  return guarded(nullptr, [&] {
    if (!version) return fail(symmarInvalidArgument, "symmarGetVersion: version is NULL");
    *version = SYMMAR_VERSION_CODE;
    return symmarSuccess;
  });
}

const char* symmarAlgoName(symmarAlgo_t algo) { return algoName(rawEnum(algo)); }

size_t symmarTypeSize(symmarDataType_t dtype) {
  switch (rawEnum(dtype)) {
    case symmarFloat32: return 4;
    case symmarFloat16: return 2;
    case symmarBfloat16: return 2;
    case symmarInt32: return 4;
    case symmarFloat64: return 8;
    default: return 0;
  }
}

symmarResult_t symmarPlan(const symmarTopology_t* topo, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                          symmarAlgo_t* algo) {
  return guarded(nullptr, [&] {
    if (!topo || !algo) return fail(symmarInvalidArgument, "symmarPlan: topo and algo must not be NULL");
    SYMMAR_CHECK(checkRequest(count, rawEnum(dtype), rawEnum(op), "symmarPlan"));
    if (topo->world_size < 1) return fail(symmarInvalidArgument, "symmarPlan: world_size %d < 1", topo->world_size);
    if (rawEnum(topo->link) < symmarLinkUnknown || rawEnum(topo->link) >= symmarNumLinks) {
      return fail(symmarInvalidArgument, "symmarPlan: invalid link %d", rawEnum(topo->link));
    }
    if (topo->cc_major < 0 || topo->cc_minor < 0 || topo->cc_minor > 9) {
      return fail(symmarInvalidArgument, "symmarPlan: invalid compute capability %d.%d", topo->cc_major,
                  topo->cc_minor);
    }
    const Tables* tables = nullptr;
    SYMMAR_CHECK(processTables(&tables));
    const TableRow* row = tables->resolve(topo->cc_major, topo->cc_minor, topo->link, topo->world_size);
    if (topo->link != symmarLinkHostMemory) noteRowServed(topo->cc_major, topo->cc_minor, topo->link, *row);
    // A topology alone says nothing about fallbacks: assume the usual one is there.
    uint32_t fallbacks = topo->cc_major == 0 ? algoBit(symmarAlgoMpi) : algoBit(symmarAlgoNccl);
    *algo = planRequest(*row, *topo, fallbacks, count, dtype, op);
    if (*algo == symmarAlgoAuto) {
      return fail(symmarUnsupported, "symmarPlan: no algorithm can serve %s %s on this topology", dtypeName(dtype),
                  opName(op));
    }
    return symmarSuccess;
  });
}

}  // extern "C"

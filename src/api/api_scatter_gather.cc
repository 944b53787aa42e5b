// Reduce-scatter and all-gather entry points: argument checks, planning, dispatch to the backend
// or the host fallback.
#include <string>

#include "api/checks.h"
#include "api/collective.h"
#include "api/guard.h"
#include "core/names.h"
#include "plan/planner.h"

using namespace symmar;

namespace {

const char* collectiveWords(Collective coll) {
  return coll == Collective::kReduceScatter ? "reduce-scatter" : "all-gather";
}

symmarResult_t scatterGather(ScatterGatherCall c, symmarComm* comm, const char* fn) {
  // Count 0 is a successful call that moves no data (buffers may be NULL); backends that can
  // check call matching still take part in it, as for an allreduce.
  if (c.count > 0) {
    SYMMAR_CHECK(checkScatterGatherBuffers(c.coll, c.send, c.recv, c.count, c.dtype, comm->rank, comm->nranks, fn));
  }
  const Request request{c.dtype, c.op, c.count * c.elem(), c.coll, comm->placement.hosts};
  const uint32_t fallbacks = comm->fallbacks(c.coll);
  if (c.algo == symmarAlgoAuto) {
    c.algo = planScatterGather(comm->row(c.coll), comm->topo, fallbacks, request,
                               comm->available.of(comm->topo, request, fallbacks));
    if (c.algo == symmarAlgoAuto) {
      return fail(symmarUnsupported, "%s: no algorithm can serve a %s of %zu x %s on this comm (link %s, no fallback)",
                  fn, collectiveWords(c.coll), c.count, dtypeName(c.dtype), linkName(comm->topo.link));
    }
  } else if (const Refusal why = refusalOf(c.algo, comm->topo, request, fallbacks); why != Refusal::kNone) {
    return fail(symmarUnsupported, "%s: algorithm %s cannot serve a %s of %zu x %s on this comm: %s (link %s)", fn,
                symmarAlgoName(c.algo), collectiveWords(c.coll), c.count, dtypeName(c.dtype), refusalText(why),
                linkName(comm->topo.link));
  }
  symmarResult_t res = symmarSuccess;
  if (c.algo == symmarAlgoMpi) {  // the host fallback's form of this collective, held by the comm
    res = runOnFallback(comm, callSignature(c), c.count, c.stream, fn, [&] {
      return c.coll == Collective::kReduceScatter
                 ? comm->fallback_reduce_scatter(c.send, c.recv, c.count, c.dtype, c.op, comm->fallback_user)
                 : comm->fallback_all_gather(c.send, c.recv, c.count, c.dtype, comm->fallback_user);
    });
  } else {
    res = comm->backend->scatterGather(c);
  }
  noteFailure(comm, res);
  return res;
}

/// Takes the raw int of the caller's enum (rawEnum): loading an out-of-range value as the C++ enum
/// is undefined.
symmarResult_t checkAlgo(int algo, const char* fn) {
  if (!validAlgo(algo)) return fail(symmarInvalidArgument, "%s: invalid algorithm %d", fn, algo);
  return symmarSuccess;
}

}  // namespace

extern "C" {

symmarResult_t symmarReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, symmarDataType_t dtype,
                                   symmarRedOp_t op, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    const char* fn = "symmarReduceScatter";
    SYMMAR_CHECK(checkRequest(recvcount, rawEnum(dtype), rawEnum(op), fn));
    return scatterGather({Collective::kReduceScatter, sendbuf, recvbuf, recvcount, dtype, op, symmarAlgoAuto, stream},
                         comm, fn);
  });
}

symmarResult_t symmarReduceScatterAlgo(const void* sendbuf, void* recvbuf, size_t recvcount, symmarDataType_t dtype,
                                       symmarRedOp_t op, symmarAlgo_t algo, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    const char* fn = "symmarReduceScatterAlgo";
    SYMMAR_CHECK(checkRequest(recvcount, rawEnum(dtype), rawEnum(op), fn));
    SYMMAR_CHECK(checkAlgo(rawEnum(algo), fn));
    return scatterGather({Collective::kReduceScatter, sendbuf, recvbuf, recvcount, dtype, op, algo, stream}, comm, fn);
  });
}

symmarResult_t symmarAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, symmarDataType_t dtype,
                               symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    const char* fn = "symmarAllGather";
    SYMMAR_CHECK(checkRequest(sendcount, rawEnum(dtype), symmarSum, fn));
    return scatterGather({Collective::kAllGather, sendbuf, recvbuf, sendcount, dtype, symmarSum, symmarAlgoAuto, stream},
                         comm, fn);
  });
}

symmarResult_t symmarAllGatherAlgo(const void* sendbuf, void* recvbuf, size_t sendcount, symmarDataType_t dtype,
                                   symmarAlgo_t algo, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    const char* fn = "symmarAllGatherAlgo";
    SYMMAR_CHECK(checkRequest(sendcount, rawEnum(dtype), symmarSum, fn));
    SYMMAR_CHECK(checkAlgo(rawEnum(algo), fn));
    return scatterGather({Collective::kAllGather, sendbuf, recvbuf, sendcount, dtype, symmarSum, algo, stream}, comm, fn);
  });
}

}  // extern "C"

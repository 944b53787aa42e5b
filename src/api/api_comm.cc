// The comm's C entry points: creation, destruction and queries.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/names.h"
#include "gpu/gpu_entry.h"
#include "host/host_backend.h"
#include "plan/planner.h"

using namespace symmar;


extern "C" {

symmarResult_t symmarGetUniqueId(symmarUniqueId* id) {
  return guarded(nullptr, [&] {
    if (!id) return fail(symmarInvalidArgument, "symmarGetUniqueId: id is NULL");
    return makeUniqueId(id);
  });
}

symmarResult_t symmarCommInitRank(symmarComm_t* out, int nranks, symmarUniqueId id, int rank,
                                  const symmarConfig_t* config) {
  return guarded(nullptr, [&] {
    if (!out) return fail(symmarInvalidArgument, "symmarCommInitRank: comm is NULL");
    *out = nullptr;
    std::unique_ptr<symmarComm> comm;
    SYMMAR_CHECK(prepareComm(nranks, rank, config, &comm));
    SYMMAR_CHECK(createTcpBootstrap(id, rank, nranks, comm->settings.timeout_ms, &comm->bootstrap));
    return finishComm(std::move(comm), out);
  });
}

symmarResult_t symmarCommInitExternal(symmarComm_t* out, int nranks, int rank, symmarAllGatherFn allgather,
                                      void* user, const symmarConfig_t* config) {
  return guarded(nullptr, [&] {
    if (!out) return fail(symmarInvalidArgument, "symmarCommInitExternal: comm is NULL");
    *out = nullptr;
    if (!allgather) return fail(symmarInvalidArgument, "symmarCommInitExternal: allgather is NULL");
    std::unique_ptr<symmarComm> comm;
    SYMMAR_CHECK(prepareComm(nranks, rank, config, &comm));
    comm->bootstrap = createExternalBootstrap(rank, nranks, allgather, user);
    return finishComm(std::move(comm), out);
  });
}

symmarResult_t symmarCommInitAll(symmarComm_t* comms, int nranks, const int* devices, const symmarConfig_t* config) {
  return guarded(nullptr, [&] {
    if (!comms) return fail(symmarInvalidArgument, "symmarCommInitAll: comms is NULL");
    if (nranks < 1) return fail(symmarInvalidArgument, "symmarCommInitAll: nranks %d < 1", nranks);
    SymmarSettings probe;
    SYMMAR_CHECK(resolveSettings(config, &probe));
    symmarConfig_t base = SYMMAR_CONFIG_INIT;
    if (config) base = *config;
    symmarUniqueId id;
    SYMMAR_CHECK(makeUniqueId(&id));
    std::vector<symmarResult_t> results(nranks, symmarSuccess);
    std::vector<std::string> errors(nranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r) {
      threads.emplace_back([&, r] {
        symmarConfig_t c = base;
        if (devices) c.device = devices[r];
        results[r] = symmarCommInitRank(&comms[r], nranks, id, r, &c);
        errors[r] = symmarGetLastError(nullptr);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < nranks; ++r) {
      if (results[r] == symmarSuccess) continue;
      for (int q = 0; q < nranks; ++q) {
        if (results[q] == symmarSuccess) symmarCommDestroy(comms[q]);
        comms[q] = nullptr;
      }
      return fail(results[r], "symmarCommInitAll: rank %d: %s", r, errors[r].c_str());
    }
    return symmarSuccess;
  });
}

symmarResult_t symmarCommDestroy(symmarComm_t comm) {
  return guarded(nullptr, [&] {
    if (!comm) return fail(symmarInvalidArgument, "symmarCommDestroy: comm is NULL");
    uint64_t live = kCommMagic;
    if (!comm->magic.compare_exchange_strong(live, 0)) {
      return fail(symmarInvalidUsage, "symmarCommDestroy: not a live communicator (destroyed already?)");
    }
    if (comm->users.load() != 0) {
      comm->magic.store(kCommMagic);
      return fail(symmarInvalidUsage, "symmarCommDestroy: another thread is in a call on this comm; destroy must not "
                  "race calls on the same comm");
    }
    comm->backend.reset();
    if (comm->fallback_release) comm->fallback_release(comm->fallback_user);
    comm->fallback_release = nullptr;
    comm->fallback_fn = nullptr;
    buryComm(comm);
    return symmarSuccess;
  });
}

symmarResult_t symmarCommGetAsyncError(symmarComm_t comm, symmarResult_t* async_error) {
  return guardedComm(comm, [&] {
    if (!async_error) return fail(symmarInvalidArgument, "symmarCommGetAsyncError: NULL argument");
    int failed = comm->failed.load();
    *async_error = failed != symmarSuccess ? static_cast<symmarResult_t>(failed) : comm->backend->asyncError();
    // The call itself succeeds, so guarded() keeps the comm's text: the failure it reports must
    // reach symmarGetLastError(comm) here, or a caller polling for it gets a code without a cause.
    if (*async_error != symmarSuccess && !threadLastError().empty()) {
      std::lock_guard<std::mutex> lock(comm->error_mutex);
      comm->last_error = threadLastError();
    }
    return symmarSuccess;
  });
}

symmarResult_t symmarCommTopology(symmarComm_t comm, symmarTopology_t* topo) {
  return guardedComm(comm, [&] {
    if (!topo) return fail(symmarInvalidArgument, "symmarCommTopology: NULL argument");
    *topo = comm->topo;
    return symmarSuccess;
  });
}

symmarResult_t symmarCommAdoptNccl(symmarComm_t comm, void* nccl_comm) {
  return guardedCollective(comm, [&] {
    if (!nccl_comm) return fail(symmarInvalidArgument, "symmarCommAdoptNccl: nccl_comm is NULL");
    symmarResult_t res = comm->backend->adoptNccl(nccl_comm);
    if (res == symmarInvalidUsage && threadLastError().empty()) {
      return fail(res, "symmarCommAdoptNccl: the host backend has no NCCL fallback");
    }
    return res;
  });
}

symmarResult_t symmarCommSetFallback(symmarComm_t comm, symmarFallbackAllReduceFn fn, void (*release)(void*),
                                     void* user) {
  return guardedCollective(comm, [&] {
    if (!fn) return fail(symmarInvalidArgument, "symmarCommSetFallback: fn is NULL");
    if (comm->gpu()) return fail(symmarInvalidUsage, "symmarCommSetFallback: a GPU comm uses NCCL");
    if (comm->fallback_release) comm->fallback_release(comm->fallback_user);
    comm->fallback_fn = fn;
    comm->fallback_release = release;
    comm->fallback_user = user;
    comm->fallback_reduce_scatter = nullptr;
    comm->fallback_all_gather = nullptr;
    return symmarSuccess;
  });
}

symmarResult_t symmarCommSetFallbackCollectives(symmarComm_t comm, symmarFallbackReduceScatterFn reduce_scatter,
                                                symmarFallbackAllGatherFn all_gather) {
  return guardedCollective(comm, [&] {
    if (!comm->fallback_fn) {
      return fail(symmarInvalidUsage, "symmarCommSetFallbackCollectives: install the fallback with "
                  "symmarCommSetFallback first");
    }
    comm->fallback_reduce_scatter = reduce_scatter;
    comm->fallback_all_gather = all_gather;
    return symmarSuccess;
  });
}

symmarResult_t symmarCommSetHostThreads(symmarComm_t comm, int threads, symmarParallelForFn run, void* user) {
  return guardedComm(comm, [&] {
    if (threads < 1 || threads > kMaxHostThreads) {
      return fail(symmarInvalidArgument, "symmarCommSetHostThreads: threads %d is outside 1..%d", threads,
                  kMaxHostThreads);
    }
    if (comm->gpu()) return fail(symmarUnsupported, "symmarCommSetHostThreads: a GPU comm has no host steps");
    symmarResult_t res = comm->backend->setHostThreads(threads, run, user);
    if (res == symmarUnsupported && threadLastError().empty()) {
      return fail(res, "symmarCommSetHostThreads: this comm's backend has no host steps");
    }
    return res;
  });
}

symmarResult_t symmarCommDescribe(symmarComm_t comm, char* buf, size_t len) {
  return guardedComm(comm, [&] {
    if (!buf || len == 0) return fail(symmarInvalidArgument, "symmarCommDescribe: NULL argument or len 0");
    std::string text = describeComm(*comm);
    snprintf(buf, len, "%s", text.c_str());
    return symmarSuccess;
  });
}

symmarResult_t symmarCommRank(symmarComm_t comm, int* rank) {
  return guardedComm(comm, [&] {
    if (!rank) return fail(symmarInvalidArgument, "symmarCommRank: NULL argument");
    *rank = comm->rank;
    return symmarSuccess;
  });
}

symmarResult_t symmarReportError(symmarResult_t code, const char* text) {
  const int raw = rawEnum(code);  // any int may come from C
  const symmarResult_t valid = raw > 0 && raw < symmarNumResults ? code : symmarInternalError;
  return fail(valid, "%s", text ? text : "(no text)");
}

symmarResult_t symmarCommCount(symmarComm_t comm, int* nranks) {
  return guardedComm(comm, [&] {
    if (!nranks) return fail(symmarInvalidArgument, "symmarCommCount: NULL argument");
    *nranks = comm->nranks;
    return symmarSuccess;
  });
}

}  // extern "C"

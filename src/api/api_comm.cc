// Comm lifecycle: settings, bootstrap, backend selection, destroy.
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
#include "gpu/cuda_backend.h"
#include "host/host_backend.h"
#include "plan/planner.h"

using namespace symmar;

namespace symmar {
namespace {

// Staging per rank when neither config nor SYMMAR_STAGING_BYTES says: the host backend reads
// through staging for every call, so a larger one means fewer barriers (docs/performance.md); GPUs
// chunk through it only above the one-shot sizes.
constexpr int64_t kDefaultHostStaging = int64_t{32} << 20;
constexpr int64_t kDefaultGpuStaging = int64_t{8} << 20;

symmarResult_t resolveSettings(const symmarConfig_t* config, SymmarSettings* s) {
  symmarConfig_t c = SYMMAR_CONFIG_INIT;
  if (config) {
    if (config->size != sizeof(symmarConfig_t)) {
      return fail(symmarInvalidArgument, "config.size is %zu, expected %zu (initialise with SYMMAR_CONFIG_INIT)",
                  config->size, sizeof(symmarConfig_t));
    }
    c = *config;
  }
  if (c.device < SYMMAR_DEVICE_AUTO) return fail(symmarInvalidArgument, "config.device %d is invalid", c.device);
  if (c.timeout_ms < 0) return fail(symmarInvalidArgument, "config.timeout_ms %d is negative", c.timeout_ms);
  if (c.staging_bytes != 0 && c.staging_bytes < 4096) {
    return fail(symmarInvalidArgument, "config.staging_bytes %zu is below the minimum of 4096", c.staging_bytes);
  }
  s->device = c.device;
  s->staging_bytes = c.staging_bytes;
  s->timeout_ms = c.timeout_ms ? c.timeout_ms : static_cast<int>(envNumber("SYMMAR_TIMEOUT_MS"));
  if (c.table_file) s->table_file = c.table_file;
  else if (const char* env = envRaw("SYMMAR_TABLE_FILE")) s->table_file = env;
  return symmarSuccess;
}

/// The sizes that shape every rank's segments and chunking, and the start epoch, must be equal on
/// every rank (a rank mapping a peer's segment larger than the peer made it would fault): each
/// rank resolves its own, then all take the smallest size asked for and rank 0's epoch.
symmarResult_t agreeSizes(symmarComm& comm, bool gpu) {
  SymmarSettings& s = comm.settings;
  struct Sizes {
    uint64_t staging, heap, chunk, epoch;
  };
  std::vector<Sizes> all(static_cast<size_t>(comm.nranks));
  Sizes& mine = all[static_cast<size_t>(comm.rank)];
  mine.staging = s.staging_bytes ? s.staging_bytes
                                 : static_cast<uint64_t>(envNumber("SYMMAR_STAGING_BYTES",
                                                                   gpu ? kDefaultGpuStaging : kDefaultHostStaging));
  mine.heap = static_cast<uint64_t>(envNumber("SYMMAR_HEAP_BYTES"));
  mine.chunk = static_cast<uint64_t>(envNumber("SYMMAR_HOST_CHUNK_BYTES"));
  mine.epoch = static_cast<uint64_t>(envNumber("SYMMAR_EPOCH_START"));
  SYMMAR_CHECK(comm.bootstrap->allGather(all.data(), sizeof(Sizes)));
  // Every rank's record is checked against the registry's ranges before anything is sized from
  // it: a broken or foreign peer must not shrink the staging below what the schedule needs.
  for (int r = 0; r < comm.nranks; ++r) {
    const Sizes& x = all[static_cast<size_t>(r)];
    for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"SYMMAR_STAGING_BYTES", x.staging},
                                      {"SYMMAR_HEAP_BYTES", x.heap},
                                      {"SYMMAR_HOST_CHUNK_BYTES", x.chunk},
                                      {"SYMMAR_EPOCH_START", x.epoch}}) {
      const EnvVarInfo* v = envInfo(name);
      if (value < static_cast<uint64_t>(v->min) || value > static_cast<uint64_t>(v->max)) {
        return fail(symmarInvalidUsage, "rank %d sent %llu for %s, outside %lld..%lld: ranks of one comm must run "
                    "the same symmar and agree on their settings", r, static_cast<unsigned long long>(value), name,
                    static_cast<long long>(v->min), static_cast<long long>(v->max));
      }
    }
  }
  Sizes agreed = all[0];
  for (const Sizes& x : all) {
    agreed.staging = std::min(agreed.staging, x.staging);
    agreed.heap = std::min(agreed.heap, x.heap);
    agreed.chunk = std::min(agreed.chunk, x.chunk);
  }
  s.staging_bytes = static_cast<size_t>(agreed.staging);
  s.heap_bytes = static_cast<size_t>(agreed.heap);
  s.host_chunk_bytes = static_cast<size_t>(agreed.chunk);
  s.epoch_start = static_cast<uint32_t>(agreed.epoch);
  return symmarSuccess;
}

/// What decides this comm's plans: its table row and the environment overrides.
uint64_t planFingerprint(const TableRow& row, const PlanEnv& env) {
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint64_t v) { h = fnv1aMix(h, v); };
  mix(static_cast<uint64_t>(row.arch));
  mix(static_cast<uint64_t>(row.link));
  mix(static_cast<uint64_t>(row.world));
  mix(static_cast<uint64_t>(row.hosts));
  for (int i = 0; i < row.num_entries; ++i) {
    mix(static_cast<uint64_t>(row.entries[i].algo));
    mix(row.entries[i].max_bytes);
  }
  mix(static_cast<uint64_t>(env.forced));
  mix(env.disabled);
  return h;
}

/// Everything that needs no peer: settings and tables. Failing here costs the peers nothing but
/// their bounded wait.
symmarResult_t prepareComm(int nranks, int rank, const symmarConfig_t* config, std::unique_ptr<symmarComm>* out) {
  if (nranks < 1) return fail(symmarInvalidArgument, "nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks) return fail(symmarInvalidArgument, "rank %d outside 0..%d", rank, nranks - 1);
  auto comm = std::make_unique<symmarComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  SYMMAR_CHECK(resolveSettings(config, &comm->settings));
  comm->tables = Tables::builtin();
  if (!comm->settings.table_file.empty()) SYMMAR_CHECK(comm->tables.loadFile(comm->settings.table_file.c_str()));
  *out = std::move(comm);
  return symmarSuccess;
}

/// Collective: picks the backend (all ranks must agree) and builds it.
symmarResult_t finishComm(std::unique_ptr<symmarComm> comm, symmarComm_t* out) {
  setLogRank(comm->rank);
  bool gpu = comm->settings.device >= 0;
  if (comm->settings.device == SYMMAR_DEVICE_AUTO) {
    int device = -1;
    gpu = cudaUsable(&device);
    comm->settings.device = gpu ? device : SYMMAR_DEVICE_CPU;
  }
  std::vector<int32_t> kinds(comm->nranks, 0);
  kinds[comm->rank] = gpu ? 1 : 0;
  SYMMAR_CHECK(comm->bootstrap->allGather(kinds.data(), sizeof(int32_t)));
  for (int r = 0; r < comm->nranks; ++r) {
    if (kinds[r] != kinds[comm->rank]) {
      return fail(symmarInvalidUsage, "rank %d uses the %s backend but rank %d the %s backend", comm->rank,
                  gpu ? "cuda" : "host", r, kinds[r] ? "cuda" : "host");
    }
  }
  envLogSet();
  SYMMAR_CHECK(agreeSizes(*comm, gpu));
  std::unique_ptr<Backend> backend;
  BackendContext ctx;
  ctx.rank = comm->rank;
  ctx.nranks = comm->nranks;
  ctx.bootstrap = comm->bootstrap.get();
  ctx.settings = comm->settings;
  BackendFacts facts;
  SYMMAR_CHECK(gpu ? createCudaBackend(ctx, &facts, &backend) : HostBackend::create(ctx, &facts, &backend));
  comm->backend = std::move(backend);
  comm->topo = facts.topo;
  comm->placement = facts.placement;
  comm->inter_host = facts.inter_host;
  comm->checks = facts.checks;
  comm->settings.staging_bytes = facts.staging_bytes;
  // The row never changes for a comm: (arch, link, world, hosts) are fixed, so resolve it once here.
  comm->row = resolveRow(*comm);
  noteRowServed(comm->topo.cc_major, comm->topo.cc_minor, comm->topo.link, *comm->row);
  // Every rank must plan alike (same row, same SYMMAR_ALGO/SYMMAR_DISABLE), or auto would run
  // different algorithms on different ranks.
  std::vector<uint64_t> plans(comm->nranks, 0);
  plans[comm->rank] = planFingerprint(*comm->row, planEnv());
  SYMMAR_CHECK(comm->bootstrap->allGather(plans.data(), sizeof(uint64_t)));
  for (int r = 0; r < comm->nranks; ++r) {
    if (plans[r] != plans[comm->rank]) {
      return fail(symmarInvalidUsage, "rank %d plans differently from rank %d (different table file or SYMMAR_ALGO / "
                  "SYMMAR_DISABLE): every rank must use the same tables and settings", r, comm->rank);
    }
  }
  SYMMAR_INFO(kSubsysInit, "comm rank %d/%d on %s: link %s, cc %d.%d, multicast %d, row %s (%s)", comm->rank,
              comm->nranks, gpu ? "cuda" : "host", linkName(comm->topo.link), comm->topo.cc_major,
              comm->topo.cc_minor, comm->topo.multicast, archKeyName(comm->row->arch).c_str(),
              comm->row->source.c_str());
  comm->magic.store(kCommMagic);
  *out = comm.release();
  return symmarSuccess;
}

std::string bytesText(uint64_t b) {
  if (b == kUnbounded) return "unbounded";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string describeComm(const symmarComm& comm) {
  const TableRow& row = *comm.row;
  std::string text = std::string(comm.settings.device >= 0 ? "cuda" : "host") + " backend, link " +
                     linkName(comm.topo.link) + ", cc " + std::to_string(comm.topo.cc_major) + "." +
                     std::to_string(comm.topo.cc_minor) + ", multicast " + std::to_string(comm.topo.multicast) +
                     ", staging " + bytesText(comm.settings.staging_bytes) + "; row " + archKeyName(row.arch) + "/" +
                     linkName(row.link) + "/" + std::to_string(row.world) +
                     (row.hosts > 1 ? " per host x " + std::to_string(row.hosts) + " hosts" : "") + ":";
  // The row is shared by every comm of its (arch, link, world); what this comm can run is not (a
  // Python or engine comm has no mpi fallback, SYMMAR_DISABLE): say so next to each entry, so the
  // line tells what runs rather than what the table would like.
  uint32_t runnable = 0;
  for (int d = 0; d < symmarNumTypes; ++d) {
    for (int o = 0; o < symmarNumOps; ++o) {
      runnable |= availableAlgos(comm.topo, static_cast<symmarDataType_t>(d), static_cast<symmarRedOp_t>(o),
                                 comm.fallbacks());
    }
  }
  for (int i = 0; i < row.num_entries; ++i) {
    const symmarAlgo_t algo = row.entries[i].algo;
    text += std::string(i ? ", " : " ") + symmarAlgoName(algo) + "<=" + bytesText(row.entries[i].max_bytes);
    if (runnable & algoBit(algo)) continue;
    // The reason for a reduction every algorithm's kernels take (the refusal is then not the dtype's).
    const char* why = refusalText(refusalOf(algo, comm.topo, {symmarFloat16, symmarSum, 0}, comm.fallbacks()));
    text += (algo == symmarAlgoMultimem && (runnable & algoBit(symmarAlgoTwoShot)) ? " (runs twoshot here: "
                                                                                     : " (not on this comm: ") +
            std::string(why) + ")";
  }
  text += " (" + row.source + ")";
  text += describeHosts(comm);
  if (!comm.checks.empty()) text += "; checks: " + comm.checks;
  return text;
}

}  // namespace
}  // namespace symmar

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
  return guardedComm(comm, [&] {
    SYMMAR_CHECK(checkComm(comm));
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
  return guardedComm(comm, [&] {
    SYMMAR_CHECK(checkComm(comm));
    if (!fn) return fail(symmarInvalidArgument, "symmarCommSetFallback: fn is NULL");
    if (comm->settings.device >= 0) return fail(symmarInvalidUsage, "symmarCommSetFallback: a GPU comm uses NCCL");
    if (comm->fallback_release) comm->fallback_release(comm->fallback_user);
    comm->fallback_fn = fn;
    comm->fallback_release = release;
    comm->fallback_user = user;
    return symmarSuccess;
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

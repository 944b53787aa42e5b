// Comm creation: settings resolved from the config, the environment and defaults; one round of
// every rank's record (backend, sizes, identity, nonce), the plans every rank must agree on; the
// backend every rank picks alike.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/host_layout.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/names.h"
#include "core/random.h"
#include "gpu/gpu_entry.h"
#include "host/host_backend.h"
#include "plan/planner.h"

namespace symmar {
namespace {

// Staging per rank when neither config nor SYMMAR_STAGING_BYTES says: the host backend reads
// through staging for every call, so a larger one means fewer barriers (docs/performance/host-allreduce.md); GPUs
// chunk through it only above the one-shot sizes.
constexpr int64_t kDefaultHostStaging = int64_t{32} << 20;
constexpr int64_t kDefaultGpuStaging = int64_t{8} << 20;

/// What every rank tells every other once, at creation: which backend it runs, the sizes it asks
/// for (each rank resolves its own from the environment), where it runs and a fresh nonce. One
/// round, checked once; the backends read what they need from the context.
struct PeerRecord {
  int32_t gpu;  // 1: the cuda backend, 0: the host backend
  int32_t pad;
  uint64_t staging, heap, chunk, epoch;
  ProcessIdentity id;
  uint64_t nonce;
};
// A test plants a bad staging size by the record's size and layout (tests/mp/bootstrap_test.cc).
static_assert(sizeof(PeerRecord) == 72 && offsetof(PeerRecord, staging) == 8, "creation record layout changed");

/// This rank's record.
PeerRecord ownRecord(const SymmarSettings& s, bool gpu) {
  PeerRecord r{};
  r.gpu = gpu ? 1 : 0;
  r.staging = s.staging_bytes ? s.staging_bytes
                              : static_cast<uint64_t>(envNumber("SYMMAR_STAGING_BYTES",
                                                                gpu ? kDefaultGpuStaging : kDefaultHostStaging));
  r.heap = static_cast<uint64_t>(envNumber("SYMMAR_HEAP_BYTES"));
  r.chunk = static_cast<uint64_t>(envNumber("SYMMAR_HOST_CHUNK_BYTES"));
  r.epoch = static_cast<uint64_t>(envNumber("SYMMAR_EPOCH_START"));
  r.id = selfIdentity();
  r.nonce = freshNonce();
  return r;
}

/// Every rank must run the same backend, and every rank's sizes must lie in the registry's ranges
/// before anything is sized from them: a broken or foreign peer must not shrink the staging below
/// what the schedule needs.
symmarResult_t checkRecords(const std::vector<PeerRecord>& all, int rank) {
  const bool gpu = all[static_cast<size_t>(rank)].gpu != 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const PeerRecord& x = all[r];
    if (x.gpu != all[static_cast<size_t>(rank)].gpu) {
      return fail(symmarInvalidUsage, "rank %d uses the %s backend but rank %zu the %s backend", rank,
                  gpu ? "cuda" : "host", r, x.gpu ? "cuda" : "host");
    }
    for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"SYMMAR_STAGING_BYTES", x.staging},
                                      {"SYMMAR_HEAP_BYTES", x.heap},
                                      {"SYMMAR_HOST_CHUNK_BYTES", x.chunk},
                                      {"SYMMAR_EPOCH_START", x.epoch}}) {
      const EnvVarInfo* v = envInfo(name);
      if (value < static_cast<uint64_t>(v->min) || value > static_cast<uint64_t>(v->max)) {
        return fail(symmarInvalidUsage, "rank %zu sent %llu for %s, outside %lld..%lld: ranks of one comm must run "
                    "the same symmar and agree on their settings", r, static_cast<unsigned long long>(value), name,
                    static_cast<long long>(v->min), static_cast<long long>(v->max));
      }
    }
  }
  return symmarSuccess;
}

/// The sizes that shape every rank's segments and chunking must be equal on every rank (a rank
/// mapping a peer's segment larger than the peer made it would fault): the smallest any rank asked
/// for, and rank 0's start epoch. Then where the ranks sit and this host's nonce.
void applyRecords(const std::vector<PeerRecord>& all, int rank, SymmarSettings* s, BackendContext* ctx) {
  PeerRecord agreed = all[0];
  std::vector<uint64_t> host_of;
  for (const PeerRecord& x : all) {
    agreed.staging = std::min(agreed.staging, x.staging);
    agreed.heap = std::min(agreed.heap, x.heap);
    agreed.chunk = std::min(agreed.chunk, x.chunk);
    host_of.push_back(x.id.host_hash);
  }
  s->staging_bytes = static_cast<size_t>(agreed.staging);
  s->heap_bytes = static_cast<size_t>(agreed.heap);
  s->host_chunk_bytes = static_cast<size_t>(agreed.chunk);
  s->epoch_start = static_cast<uint32_t>(agreed.epoch);
  const PeerRecord& mine = all[static_cast<size_t>(rank)];
  ctx->placement = placeRanks(host_of, rank);
  ctx->host_ranks = ranksOnHost(host_of, rank);
  ctx->ranks_by_host = ranksByHost(host_of);
  ctx->host_nonce = all[static_cast<size_t>(ctx->host_ranks[0])].nonce;
  ctx->machine_ranks = 0;
  for (const PeerRecord& x : all) ctx->machine_ranks += x.id.machine_hash == mine.id.machine_hash;
}

/// What decides this comm's plans: its table row and the environment overrides.
uint64_t planFingerprint(const TableRow* const (&rows)[kNumCollectives], const PlanEnv& env) {
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint64_t v) { h = fnv1aMix(h, v); };
  for (const TableRow* row : rows) {
    mix(static_cast<uint64_t>(row->coll));
    mix(static_cast<uint64_t>(row->arch));
    mix(static_cast<uint64_t>(row->link));
    mix(static_cast<uint64_t>(row->world));
    mix(static_cast<uint64_t>(row->hosts));
    for (int i = 0; i < row->num_entries; ++i) {
      mix(static_cast<uint64_t>(row->entries[i].algo));
      mix(row->entries[i].max_bytes);
      mix(row->entries[i].min_elem_bytes);
    }
  }
  mix(static_cast<uint64_t>(env.forced));
  mix(env.disabled);
  return h;
}

}  // namespace

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
  bool gpu = comm->gpu();  // or, with SYMMAR_DEVICE_AUTO, whether this process has a usable GPU
  if (comm->settings.device == SYMMAR_DEVICE_AUTO) {
    int device = -1;
    gpu = cudaUsable(&device);
    comm->settings.device = gpu ? device : SYMMAR_DEVICE_CPU;
  }
  envLogSet();
  std::vector<PeerRecord> records(static_cast<size_t>(comm->nranks));
  records[static_cast<size_t>(comm->rank)] = ownRecord(comm->settings, gpu);
  SYMMAR_CHECK(comm->bootstrap->allGather(records.data(), sizeof(PeerRecord)));
  SYMMAR_CHECK(checkRecords(records, comm->rank));
  std::unique_ptr<Backend> backend;
  BackendContext ctx;
  ctx.rank = comm->rank;
  ctx.nranks = comm->nranks;
  ctx.bootstrap = comm->bootstrap.get();
  applyRecords(records, comm->rank, &comm->settings, &ctx);
  ctx.settings = comm->settings;
  BackendFacts facts;
  SYMMAR_CHECK(gpu ? createCudaBackend(ctx, &facts, &backend) : HostBackend::create(ctx, &facts, &backend));
  comm->backend = std::move(backend);
  comm->topo = facts.topo;
  comm->placement = facts.placement;
  comm->inter_host = facts.inter_host;
  comm->checks = facts.checks;
  comm->fused_rows_cap = facts.fused_rows_cap;
  comm->settings.staging_bytes = facts.staging_bytes;
  // The rows never change for a comm: (arch, link, world, hosts) are fixed, so resolve them once here.
  for (int c = 0; c < kNumCollectives; ++c) comm->rows[c] = resolveRow(*comm, static_cast<Collective>(c));
  noteRowServed(comm->topo.cc_major, comm->topo.cc_minor, comm->topo.link, comm->row());
  // Every rank must plan alike (same rows, same SYMMAR_ALGO/SYMMAR_DISABLE), or auto would run
  // different algorithms on different ranks.
  std::vector<uint64_t> plans(comm->nranks, 0);
  plans[comm->rank] = planFingerprint(comm->rows, planEnv());
  SYMMAR_CHECK(comm->bootstrap->allGather(plans.data(), sizeof(uint64_t)));
  for (int r = 0; r < comm->nranks; ++r) {
    if (plans[r] != plans[comm->rank]) {
      return fail(symmarInvalidUsage, "rank %d plans differently from rank %d (different table file or SYMMAR_ALGO / "
                  "SYMMAR_DISABLE): every rank must use the same tables and settings", r, comm->rank);
    }
  }
  SYMMAR_INFO(kSubsysInit, "comm rank %d/%d on %s: link %s, cc %d.%d, multicast %d, row %s (%s)", comm->rank,
              comm->nranks, gpu ? "cuda" : "host", linkName(comm->topo.link), comm->topo.cc_major,
              comm->topo.cc_minor, comm->topo.multicast, archKeyName(comm->row().arch).c_str(),
              comm->row().source.c_str());
  comm->magic.store(kCommMagic);
  *out = comm.release();
  return symmarSuccess;
}

}  // namespace symmar

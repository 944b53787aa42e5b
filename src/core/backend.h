// What a comm's executor provides. One implementation per backend: host (shared memory, CPU
// threads) and cuda (VMM heap, kernels, NCCL). A backend is built from a BackendContext (who the
// ranks are, how they exchange records, the settings) and reports what it found in BackendFacts;
// it never sees the comm object of the API layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/bootstrap_api.h"
#include "core/call.h"
#include "symmar/symmar.h"

namespace symmar {

/// Effective settings of a comm: config merged with the environment and defaults, resolved once
/// (comm_init.cc). The sizes and the start epoch are agreed across ranks before a backend sees them.
struct SymmarSettings {
  int device = SYMMAR_DEVICE_AUTO;
  size_t staging_bytes = 0;     ///< agreed: the smallest any rank asked for
  int timeout_ms = 0;           ///< bound on every wait (> 0)
  std::string table_file;
  size_t heap_bytes = 0;        ///< agreed: symmetric user heap per rank
  size_t host_chunk_bytes = 0;  ///< agreed: host backend's largest chunk per barrier step
  uint32_t epoch_start = 0;     ///< agreed: rank 0's first barrier epoch
};

/// Where a comm's ranks sit. Hosts are the distinct host identities (bootstrap/host_layout.h),
/// numbered in the order of their lowest rank; a rank's local index counts its host's ranks in
/// rank order.
struct HostPlacement {
  int hosts = 1;
  int host = 0;          ///< this rank's host
  int local_rank = 0;    ///< this rank's index among its host's ranks
  int local_size = 1;    ///< ranks on this rank's host
  bool uniform = true;   ///< every host has local_size ranks (what the hierarchical path needs)
};

/// What a backend is built from.
struct BackendContext {
  int rank = 0;
  int nranks = 0;
  Bootstrap* bootstrap = nullptr;  ///< owned by the comm, alive as long as the backend
  SymmarSettings settings;
  /// Where the context's ranks are a part of the comm's (one host's ranks, numbered by local
  /// index), the comm's rank of each; empty where they are the comm's ranks.
  std::vector<int> comm_ranks;
  /// The comm's rank of the context's rank r: what messages name, so that a user reads the rank
  /// the comm knows (rank 3, not local index 1 of host 1).
  int commRank(int r) const {
    return r >= 0 && static_cast<size_t>(r) < comm_ranks.size() ? comm_ranks[static_cast<size_t>(r)] : r;
  }
  /// Learned once at comm creation from every rank's record (comm_init.cc), so that no backend
  /// gathers identities again.
  HostPlacement placement;
  /// The context's ranks on this rank's host, ascending: host_ranks[placement.local_rank] == rank.
  std::vector<int> host_ranks;
  /// The context's ranks host by host, ascending within a host (empty where the context is one
  /// host's): with as many ranks on every host, local index l of host h has rank
  /// ranks_by_host[h * placement.local_size + l].
  std::vector<int> ranks_by_host;
  /// Ranks sharing this machine's cores (pretended hosts share one machine).
  int machine_ranks = 1;
  /// Fresh per comm and per host (the nonce of the host's first rank): names this host's shared
  /// objects through nonceFor (core/random.h), so no two comms or hosts share a socket or segment.
  uint64_t host_nonce = 0;
};

/// The engine that carries the inter-host stage of a comm spanning hosts: an exchange among the
/// ranks that share this rank's local index, one per host, in host order (symmarCommSetInterHost).
struct InterHostCarrier {
  symmarInterHostExchangeFn fn = nullptr;
  void (*release)(void*) = nullptr;  ///< called with user when the backend drops the carrier
  void* user = nullptr;
  std::string name;  ///< for symmarCommDescribe ("mpi", an engine's name)
};

/// What a backend found while it was built (the same on every rank where it must be).
struct BackendFacts {
  symmarTopology_t topo{};
  HostPlacement placement;
  size_t staging_bytes = 0;  ///< staging buffer per rank the ranks agreed on
  std::string checks;        ///< outcome of the start-up checks ("" when none ran), for symmarCommDescribe
  std::string inter_host;    ///< the engine between hosts when the backend brings its own ("nccl"), else ""
  /// The most rows the fused kernels run a block each (the co-residency cap of their grid, agreed
  /// across ranks); past it a block runs its rows one after another and the unfused call is faster.
  /// 0: no such bound (the host backend's fused forms).
  size_t fused_rows_cap = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// Runs one allreduce with an algorithm that can serve it (plan/algorithms.h). Arguments are
  /// validated.
  virtual symmarResult_t allReduce(const AllReduceCall& call) = 0;
  /// The fused call in its one-shot or two-shot form (call.algo); symmarUnsupported where the
  /// backend has no fused form (the API then runs the allreduce and the norm separately), or where
  /// a row does not fit the form's staging layout (the message names what the form needs a row).
  /// An empty call (tokens or hidden 0) moves nothing but takes part in call matching where calls
  /// are matched.
  virtual symmarResult_t allReduceAddRmsNorm(const AddRmsNormCall& call) {
    (void)call;
    return symmarUnsupported;
  }
  /// The add and norm of the fused call alone, on this rank (the unfused call, after an allreduce
  /// of call.input into `sums`: tokens x hidden of call.dtype, in the same memory as the call's
  /// buffers, and possibly residual_out or norm_out itself): residual_out = sums + residual_in,
  /// then norm_out and fp8_out, row by row, on call.stream. No peer takes part.
  virtual symmarResult_t addRmsNormRows(const AddRmsNormCall& call, const void* sums) {
    (void)call;
    (void)sums;
    return symmarUnsupported;
  }
  /// Whether addRmsNormRows serves this comm, asked before the unfused call's allreduce runs, so a
  /// call the backend cannot finish fails up front instead of after its data moved. The same on
  /// every rank.
  virtual bool hasAddRmsNormRows() const { return false; }
  /// Runs one reduce-scatter or all-gather (call.coll) with an algorithm that can serve it.
  /// Arguments are validated. symmarUnsupported where the backend has no form of it.
  virtual symmarResult_t scatterGather(const ScatterGatherCall& call) {
    (void)call;
    return symmarUnsupported;
  }
  /// Call matching for a call that another engine moves (the host fallback, MPI): where the
  /// backend matches calls, the call's signature meets every peer's before any data moves, so a
  /// rank that made another call (count 0 included), failed or stopped is reported on every rank
  /// instead of pairing with its peers' calls. symmarSuccess where calls pair by order alone.
  virtual symmarResult_t matchCall(uint64_t signature) {
    (void)signature;
    return symmarSuccess;
  }
  virtual symmarResult_t memAlloc(size_t bytes, void** ptr) = 0;
  virtual symmarResult_t memFree(void* ptr) = 0;
  /// Asynchronous status (a device-side timeout); symmarSuccess if none.
  virtual symmarResult_t asyncError() { return symmarSuccess; }
  /// The comm failed (a timeout or lost peer seen anywhere): tell peers that wait on this rank.
  virtual void noteCommFailed() {}
  /// Fallback algorithms this backend serves itself (bits of symmarAlgoNccl).
  virtual uint32_t fallbacks() const { return 0; }
  /// Takes the inter-host engine of a comm spanning hosts (every rank installs one, agreed by the
  /// API layer). On success the backend owns carrier (it calls carrier.release when it drops it);
  /// on failure nothing was taken. symmarUnsupported where the backend has no hierarchical path.
  virtual symmarResult_t setInterHost(const InterHostCarrier& carrier) {
    (void)carrier;
    return symmarUnsupported;
  }
  /// The threads this rank splits its large steps over (symmarCommSetHostThreads: threads 1..64
  /// checked, run NULL for the backend's own helpers). symmarUnsupported where the backend has
  /// no such steps.
  virtual symmarResult_t setHostThreads(int threads, symmarParallelForFn run, void* user) {
    (void)threads;
    (void)run;
    (void)user;
    return symmarUnsupported;
  }
  /// Adopts an engine NCCL communicator (GPU backends only).
  virtual symmarResult_t adoptNccl(void* nccl_comm) {
    (void)nccl_comm;
    return symmarInvalidUsage;
  }
};

}  // namespace symmar

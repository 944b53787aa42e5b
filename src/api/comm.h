// The communicator behind symmarComm_t.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/backend.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "symmar/symmar.h"

struct symmarComm {
  // kCommMagic while the comm is alive. Destroy clears it and keeps the struct as a tombstone for
  // a while (api_comm.cc), so a call on a destroyed comm reads this word, not freed memory.
  std::atomic<uint64_t> magic{0};
  std::atomic<int> users{0};  // entry points running on this comm (destroy refuses while > 0)
  int rank = 0;
  int nranks = 0;
  symmar::SymmarSettings settings;
  symmarTopology_t topo{};
  symmar::HostPlacement placement;  ///< hosts and this rank's place among its host's ranks
  std::string inter_host;           ///< the engine between hosts once set ("" before, or on one host)
  std::string checks;  ///< the backend's start-up checks, as symmarCommDescribe reports them
  size_t fused_rows_cap = 0;  ///< BackendFacts::fused_rows_cap: the planner runs no fused form past it
  /// Fused calls the unfused path served (the allreduce, then the add and norm): which path ran is
  /// otherwise invisible in the results, and tests must know.
  std::atomic<uint64_t> unfused_calls{0};
  symmar::Tables tables;
  /// Each collective's row, resolved once: (arch, link, world, hosts) never change.
  const symmar::TableRow* rows[symmar::kNumCollectives] = {};
  /// The algorithms that can serve each (collective, dtype, op) here, for the collectives' planning.
  symmar::AvailableAlgos available;
  std::unique_ptr<symmar::Bootstrap> bootstrap;
  std::unique_ptr<symmar::Backend> backend;

  // Host fallback installed by libsymmar_mpi (symmarAlgoMpi).
  symmarFallbackAllReduceFn fallback_fn = nullptr;
  void (*fallback_release)(void*) = nullptr;
  void* fallback_user = nullptr;
  symmarFallbackReduceScatterFn fallback_reduce_scatter = nullptr;  // beside fallback_fn, same user
  symmarFallbackAllGatherFn fallback_all_gather = nullptr;

  // A timeout or peer failure fails the comm for good; later calls report the original cause.
  std::atomic<int> failed{symmarSuccess};
  std::mutex error_mutex;
  std::string failed_cause;
  std::string last_error;

  /// Bits of the fallbacks that serve coll on this comm (nccl, mpi).
  uint32_t fallbacks(symmar::Collective coll = symmar::Collective::kAllReduce) const;
  /// The table row that plans coll on this comm.
  const symmar::TableRow& row(symmar::Collective coll = symmar::Collective::kAllReduce) const {
    return *rows[static_cast<int>(coll)];
  }
  /// A comm of the CUDA backend (creation resolves settings.device to a GPU or SYMMAR_DEVICE_CPU).
  bool gpu() const { return settings.device >= 0; }
};

namespace symmar {
/// The comm's table row for coll: keyed by its ranks per host and number of hosts when it spans
/// hosts (api_hosts.cc).
const TableRow* resolveRow(const symmarComm& comm, Collective coll);
/// The comm's settings: config merged with the environment and defaults (no peer involved; the
/// sizes are agreed across ranks later, in finishComm).
symmarResult_t resolveSettings(const symmarConfig_t* config, SymmarSettings* s);
/// Everything that needs no peer: settings and tables. Failing here costs the peers nothing but
/// their bounded wait.
symmarResult_t prepareComm(int nranks, int rank, const symmarConfig_t* config, std::unique_ptr<symmarComm>* out);
/// Collective, once the comm has its bootstrap: picks the backend (all ranks must agree), builds
/// it, and checks that every rank plans alike; *out receives the live comm.
symmarResult_t finishComm(std::unique_ptr<symmarComm> comm, symmarComm_t* out);
/// symmarCommDescribe's line (describe.cc).
std::string describeComm(const symmarComm& comm);
/// The part of symmarCommDescribe about hosts ("" on a single host): how many, and which path
/// serves across them.
std::string describeHosts(const symmarComm& comm);
}  // namespace symmar

// The communicator behind symmarComm_t.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/backend.h"
#include "plan/table.h"
#include "symmar/symmar.h"

struct symmarComm {
  // kCommMagic while the comm is alive. Destroy clears it and keeps the struct as a tombstone for
  // a while (api_comm.cc), so a call on a destroyed comm reads this word, not freed memory.
  std::atomic<uint64_t> magic{0};
  std::atomic<int> users{0};  // entry points running on this comm (destroy refuses while > 0)
  int rank = 0;
  int nranks = 0;
  SymmarSettings settings;
  symmarTopology_t topo{};
  symmar::HostPlacement placement;  ///< hosts and this rank's place among its host's ranks
  std::string inter_host;           ///< the engine between hosts once set ("" before, or on one host)
  std::string checks;  ///< the backend's start-up checks, as symmarCommDescribe reports them
  symmar::Tables tables;
  const symmar::TableRow* row = nullptr;  // resolved once: (arch, link, world, hosts) never change
  std::unique_ptr<symmar::Bootstrap> bootstrap;
  std::unique_ptr<symmar::Backend> backend;

  // Host fallback installed by libsymmar_mpi (symmarAlgoMpi).
  symmarFallbackAllReduceFn fallback_fn = nullptr;
  void (*fallback_release)(void*) = nullptr;
  void* fallback_user = nullptr;

  // A timeout or peer failure fails the comm for good; later calls report the original cause.
  std::atomic<int> failed{symmarSuccess};
  std::mutex error_mutex;
  std::string failed_cause;
  std::string last_error;

  uint32_t fallbacks() const;
};

namespace symmar {
/// The comm's table row: keyed by its ranks per host and number of hosts when it spans hosts
/// (api_hosts.cc).
const TableRow* resolveRow(const symmarComm& comm);
/// The part of symmarCommDescribe about hosts ("" on a single host): how many, and which path
/// serves across them.
std::string describeHosts(const symmarComm& comm);
}  // namespace symmar

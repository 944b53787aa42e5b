// The communicator behind symmarComm_t.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/backend.h"
#include "plan/table.h"
#include "symmar/symmar.h"

/// Effective settings of a comm (config merged with environment and defaults).
struct SymmarSettings {
  int device = SYMMAR_DEVICE_AUTO;
  size_t staging_bytes = 0;
  int timeout_ms = 0;
  std::string table_file;
};

struct symmarComm {
  uint64_t magic = 0;  // set while the comm is alive; catches some use-after-destroy
  int rank = 0;
  int nranks = 0;
  SymmarSettings settings;
  symmarTopology_t topo{};
  symmar::Tables tables;
  const symmar::TableRow* row = nullptr;  // resolved once: (arch, link, world) never change
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

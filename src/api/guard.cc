// Comm liveness (CommUse, tombstones of destroyed comms) and failure bookkeeping for the entry points.
#include "api/guard.h"

#include <deque>
#include <memory>
#include <mutex>

namespace symmar {

CommUse::CommUse(symmarComm* comm) {
  if (!comm) {
    result_ = fail(symmarInvalidArgument, "comm is NULL");
    return;
  }
  comm->users.fetch_add(1);
  if (comm->magic.load() != kCommMagic) {
    comm->users.fetch_sub(1);
    result_ =
        fail(symmarInvalidUsage, "comm is not a live communicator (destroyed, or being destroyed by another thread)");
    return;
  }
  comm_ = comm;
}

namespace {

/// Destroyed comms stay allocated (emptied) for the next kTombstones destroys, so a stale handle
/// gets symmarInvalidUsage instead of touching freed memory. Older ones are freed.
constexpr size_t kTombstones = 1024;
std::mutex g_tombstones_mutex;
std::deque<std::unique_ptr<symmarComm>> g_tombstones;

}  // namespace

void buryComm(symmarComm* comm) {
  comm->backend.reset();
  comm->bootstrap.reset();
  comm->tables = Tables();
  for (const TableRow*& row : comm->rows) row = nullptr;
  std::lock_guard<std::mutex> lock(g_tombstones_mutex);
  g_tombstones.emplace_back(comm);
  if (g_tombstones.size() > kTombstones) g_tombstones.pop_front();
}

symmarResult_t checkComm(symmarComm* comm) {
  if (!comm) return fail(symmarInvalidArgument, "comm is NULL");
  int failed = comm->failed.load(std::memory_order_acquire);
  if (failed != symmarSuccess) {
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    return fail(symmarInvalidUsage, "comm failed earlier (%s): %s",
                symmarGetErrorString(static_cast<symmarResult_t>(failed)), comm->failed_cause.c_str());
  }
  return symmarSuccess;
}

void noteFailure(symmarComm* comm, symmarResult_t res) {
  if (res != symmarTimeout && res != symmarPeerFailure) return;
  std::lock_guard<std::mutex> lock(comm->error_mutex);
  if (comm->failed.load() == symmarSuccess) {
    comm->failed_cause = threadLastError();
    comm->failed.store(res, std::memory_order_release);
    if (comm->backend) comm->backend->noteCommFailed();
  }
}

}  // namespace symmar

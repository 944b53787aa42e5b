#include "host/mpi_inter_host.h"

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace symmar_mpi {
namespace {

constexpr int kTag = 0x5e4d;  // one tag: MPI keeps a pair's messages of one tag in order

struct InterHostState {
  MPI_Comm comm = MPI_COMM_NULL;  // the ranks with this rank's local index, ranked by host
  int hosts = 0;
  int host = 0;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
};

/// Abandons what is still pending after a timeout: receives are cancelled, sends left to finish
/// (or not) in the background. The comm is failed from here on, so nothing reuses the buffers.
void abandon(std::vector<MPI_Request>& requests) {
  for (MPI_Request& r : requests) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    MPI_Request_free(&r);
  }
}

// Every host sends its record for each other host and receives theirs: hosts - 1 of each, all
// posted at once, then polled until done or timeout_ms passed (MPI has no timed wait; a blocking
// collective would hang forever on a host that never arrives).
symmarResult_t exchange(const void* const* send, void* recv, size_t bytes, int timeout_ms, void* user) {
  InterHostState* st = static_cast<InterHostState*>(user);
  if (bytes > static_cast<size_t>(INT32_MAX)) return mpiFailure(symmarInvalidArgument, "inter-host record over 2 GiB");
  const int n = static_cast<int>(bytes);
  char* out = static_cast<char*>(recv);
  std::memcpy(out + static_cast<size_t>(st->host) * bytes, send[st->host], bytes);
  st->requests.clear();
  for (int h = 0; h < st->hosts; ++h) {
    if (h == st->host) continue;
    MPI_Request r;
    int rc = MPI_Irecv(out + static_cast<size_t>(h) * bytes, n, MPI_BYTE, h, kTag, st->comm, &r);
    if (rc == MPI_SUCCESS) st->requests.push_back(r);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(send[h], n, MPI_BYTE, h, kTag, st->comm, &r);
    if (rc != MPI_SUCCESS) {
      abandon(st->requests);
      return mpiFailure(symmarSystemError, "posting the exchange failed", rc);
    }
    st->requests.push_back(r);
  }
  st->statuses.resize(st->requests.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(st->requests.size()), st->requests.data(), &done, st->statuses.data());
    if (rc != MPI_SUCCESS) {
      // A record of another size than this rank's (MPI_ERR_TRUNCATE): that host made another call.
      abandon(st->requests);
      return mpiFailure(symmarInvalidUsage, "a host sent a record of another size (another call)", rc);
    }
    if (done) break;
    if ((polls & 255) == 255 && std::chrono::steady_clock::now() >= deadline) {
      abandon(st->requests);
      return mpiFailure(symmarTimeout, "a rank on another host did not take part within the timeout");
    }
    if (polls > 1000) sched_yield();  // oversubscribed hosts: let the peer run
  }
  for (size_t i = 0; i < st->statuses.size(); i += 2) {  // receives are the even requests
    int got = 0;
    MPI_Get_count(&st->statuses[i], MPI_BYTE, &got);
    if (got != n) return mpiFailure(symmarInvalidUsage, "a host sent a shorter record (another call)");
  }
  return symmarSuccess;
}

void release(void* user) {
  InterHostState* st = static_cast<InterHostState*>(user);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && st->comm != MPI_COMM_NULL) MPI_Comm_free(&st->comm);
  delete st;
}

}  // namespace

symmarResult_t mpiFailure(symmarResult_t code, const char* what, int mpi_error) {
  char text[MPI_MAX_ERROR_STRING + 200];
  char mpi_text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (mpi_error != MPI_SUCCESS) MPI_Error_string(mpi_error, mpi_text, &len);
  snprintf(text, sizeof(text), "libsymmar_mpi: %s%s%s", what, len ? ": " : "", mpi_text);
  return symmarReportError(code, text);
}

symmarResult_t installInterHost(symmarComm_t comm, MPI_Comm mpi_comm) {
  int hosts = 1, host = 0, local_rank = 0;
  symmarResult_t res = symmarCommHostLayout(comm, &hosts, &host, &local_rank, nullptr);
  if (res != symmarSuccess || hosts == 1) return res;
  InterHostState* st = new (std::nothrow) InterHostState;
  if (!st) return mpiFailure(symmarOutOfMemory, "out of host memory");
  st->hosts = hosts;
  st->host = host;
  // Every rank splits (hosts is the same everywhere), so the collective matches even where the
  // hosts turn out to be unequal and the engine is not used.
  int rc = MPI_Comm_split(mpi_comm, local_rank, host, &st->comm);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    release(st);
    return mpiFailure(symmarSystemError, "splitting the communicator by local index failed", rc);
  }
  // With as many ranks on every host, each split holds one rank per host ranked by host (the key).
  res = symmarCommSetInterHost(comm, exchange, release, st, "mpi");
  if (res == symmarSuccess) return res;
  release(st);
  return res == symmarUnsupported ? symmarSuccess : res;  // unequal hosts: the comm stays flat
}

}  // namespace symmar_mpi

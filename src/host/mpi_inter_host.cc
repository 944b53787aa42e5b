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
  std::vector<MPI_Request> sends;
  std::vector<char> received;              // per host: its record is in place
  std::vector<unsigned char> wrong_length;  // where a record of another length lands (then refused)
};

/// Takes host h's record if it has arrived: into place when it has this rank's length, else into
/// scratch (it is still taken whole, so its sender completes and finds the mismatch too instead of
/// waiting out its timeout); *mismatch is then set.
int takeRecord(InterHostState* st, int h, char* dst, int n, bool* mismatch) {
  int flag = 0;
  MPI_Message msg;
  MPI_Status status;
  int rc = MPI_Improbe(h, kTag, st->comm, &flag, &msg, &status);
  if (rc != MPI_SUCCESS || !flag) return rc;
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (got != n) {
    *mismatch = true;
    st->wrong_length.resize(static_cast<size_t>(got > 0 ? got : 1));
    dst = reinterpret_cast<char*>(st->wrong_length.data());
  }
  rc = MPI_Mrecv(dst, got, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) st->received[static_cast<size_t>(h)] = 1;
  return rc;
}

// Every host sends its record for each other host (posted at once) and takes theirs as they come,
// until all is done or timeout_ms passed (MPI has no timed wait; a blocking collective would hang
// forever on a host that never arrives). A host that made another call is found on both sides: a
// record of another length is still taken whole, and refused after the exchange.
symmarResult_t exchange(const void* const* send, void* recv, size_t bytes, int timeout_ms, void* user) {
  InterHostState* st = static_cast<InterHostState*>(user);
  if (bytes > static_cast<size_t>(INT32_MAX)) return mpiFailure(symmarInvalidArgument, "inter-host record over 2 GiB");
  const int n = static_cast<int>(bytes);
  char* out = static_cast<char*>(recv);
  std::memcpy(out + static_cast<size_t>(st->host) * bytes, send[st->host], bytes);
  st->sends.clear();
  st->received.assign(static_cast<size_t>(st->hosts), 0);
  st->received[static_cast<size_t>(st->host)] = 1;
  for (int h = 0; h < st->hosts; ++h) {
    if (h == st->host) continue;
    MPI_Request r;
    const int rc = MPI_Isend(send[h], n, MPI_BYTE, h, kTag, st->comm, &r);
    if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "posting the exchange failed", rc);
    st->sends.push_back(r);
  }
  bool mismatch = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned polls = 0;; ++polls) {
    int left = 0;
    for (int h = 0; h < st->hosts; ++h) {
      if (st->received[static_cast<size_t>(h)]) continue;
      const int rc = takeRecord(st, h, out + static_cast<size_t>(h) * bytes, n, &mismatch);
      if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "receiving a record failed", rc);
      left += !st->received[static_cast<size_t>(h)];
    }
    int sent = 0;
    const int rc = MPI_Testall(static_cast<int>(st->sends.size()), st->sends.data(), &sent, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "sending a record failed", rc);
    if (sent && left == 0) break;
    if ((polls & 255) == 255 && std::chrono::steady_clock::now() >= deadline) {
      // Sends still pending finish (or not) in the background: the comm is failed from here on,
      // and InterHost keeps the records alive.
      for (MPI_Request& r : st->sends) {
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
      }
      return mpiFailure(symmarTimeout, "a rank on another host did not take part within the timeout");
    }
    if (polls > 1000) sched_yield();  // oversubscribed hosts: let the peer run
  }
  if (mismatch) return mpiFailure(symmarInvalidUsage, "a host sent a record of another length (another call)");
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

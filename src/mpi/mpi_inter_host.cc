#include "mpi/mpi_inter_host.h"

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace symmar_mpi {
namespace {

constexpr int kTag = 0x5e4d;  // one tag: MPI keeps a pair's messages of one tag in order

struct InterHostState {
  MPI_Comm comm = MPI_COMM_NULL;  // the ranks with this rank's local index, ranked by host
  int hosts = 0;
  int host = 0;
  // Per host:
  std::vector<int> comm_ranks;                           // the comm's rank of its member (messages name it)
  std::vector<MPI_Request> sends;                        // this rank's record for it (null: sent, or own)
  std::vector<MPI_Request> recvs;                        // its record, matched and still arriving
  std::vector<char> received;                            // its record is in place
  std::vector<std::vector<unsigned char>> wrong_length;  // where its record lands if of another length
  bool abandoned = false;  // an exchange gave up with requests pending: their buffers must outlive st
};

/// Moves host h's record on without ever blocking: matches it once it has arrived (into place when
/// it has this rank's length, else into scratch, *mismatch then set: it is still taken whole, so
/// its sender completes and finds the mismatch too instead of waiting out its timeout) and tests
/// the receive. A matched message may still need its sender to move the data (a large one goes by
/// rendezvous), and a sender that gave up on this exchange may not call MPI again for a long time:
/// a blocking receive would then outlast the timeout, so the receive is polled like the rest.
int pollRecord(InterHostState* st, int h, char* dst, int n, bool* mismatch) {
  const size_t i = static_cast<size_t>(h);
  MPI_Request& req = st->recvs[i];
  if (req == MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status status;
    int rc = MPI_Improbe(h, kTag, st->comm, &flag, &msg, &status);
    if (rc != MPI_SUCCESS || !flag) return rc;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != n) {
      *mismatch = true;
      st->wrong_length[i].resize(static_cast<size_t>(got > 0 ? got : 1));
      dst = reinterpret_cast<char*>(st->wrong_length[i].data());
    }
    rc = MPI_Imrecv(dst, got, MPI_BYTE, &msg, &req);
    if (rc != MPI_SUCCESS) return rc;
  }
  int done = 0;
  const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS && done) st->received[i] = 1;
  return rc;
}

/// Gives up on the requests still pending: they finish (or not) in the background, into buffers
/// that stay (InterHost keeps the records, release() the scratch). The comm is failed from here on.
void abandon(InterHostState* st) {
  for (std::vector<MPI_Request>* reqs : {&st->sends, &st->recvs}) {
    for (MPI_Request& r : *reqs) {
      if (r != MPI_REQUEST_NULL) {
        MPI_Request_free(&r);
        st->abandoned = true;
      }
    }
  }
}

/// At the deadline: the first host whose record has not arrived, else the first that has not
/// taken this rank's (*took_ours false); -1 when everything completed meanwhile.
int lateHost(InterHostState* st, bool* took_ours) {
  *took_ours = true;
  for (int h = 0; h < st->hosts; ++h) {
    if (!st->received[static_cast<size_t>(h)]) return h;
  }
  for (int h = 0; h < st->hosts; ++h) {
    MPI_Request& r = st->sends[static_cast<size_t>(h)];
    int done = 1;
    if (r != MPI_REQUEST_NULL && MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
    if (!done) {
      *took_ours = false;
      return h;
    }
  }
  return -1;
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
  const size_t hosts = static_cast<size_t>(st->hosts);
  st->sends.assign(hosts, MPI_REQUEST_NULL);
  st->recvs.assign(hosts, MPI_REQUEST_NULL);
  st->wrong_length.resize(hosts);
  for (std::vector<unsigned char>& w : st->wrong_length) w.clear();
  st->received.assign(hosts, 0);
  st->received[static_cast<size_t>(st->host)] = 1;
  for (int h = 0; h < st->hosts; ++h) {
    if (h == st->host) continue;
    const int rc = MPI_Isend(send[h], n, MPI_BYTE, h, kTag, st->comm, &st->sends[static_cast<size_t>(h)]);
    if (rc != MPI_SUCCESS) {
      abandon(st);
      return mpiFailure(symmarSystemError, "posting the exchange failed", rc);
    }
  }
  bool mismatch = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned polls = 0;; ++polls) {
    int left = 0;
    for (int h = 0; h < st->hosts; ++h) {
      if (st->received[static_cast<size_t>(h)]) continue;
      const int rc = pollRecord(st, h, out + static_cast<size_t>(h) * bytes, n, &mismatch);
      if (rc != MPI_SUCCESS) {
        abandon(st);
        return mpiFailure(symmarSystemError, "receiving a record failed", rc);
      }
      left += !st->received[static_cast<size_t>(h)];
    }
    int sent = 0;
    const int rc = MPI_Testall(st->hosts, st->sends.data(), &sent, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      abandon(st);
      return mpiFailure(symmarSystemError, "sending a record failed", rc);
    }
    if (sent && left == 0) break;
    if ((polls & 255) == 255 && std::chrono::steady_clock::now() >= deadline) {
      bool took_ours = true;
      const int late = lateHost(st, &took_ours);
      if (late < 0) break;  // everything completed at the last moment
      abandon(st);
      char text[200];
      snprintf(text, sizeof(text), "rank %d (host %d) did not %s within the timeout",
               st->comm_ranks[static_cast<size_t>(late)], late,
               took_ours ? "deliver its record" : "take this rank's record");
      return mpiFailure(symmarTimeout, text);
    }
    if (polls > 1000) sched_yield();  // oversubscribed hosts: let the peer run
  }
  if (mismatch) {
    for (int h = 0; h < st->hosts; ++h) {
      const std::vector<unsigned char>& w = st->wrong_length[static_cast<size_t>(h)];
      if (w.empty()) continue;
      char text[200];
      snprintf(text, sizeof(text), "rank %d (host %d) sent a record of another length (another call)",
               st->comm_ranks[static_cast<size_t>(h)], h);
      return mpiFailure(symmarInvalidUsage, text);
    }
  }
  return symmarSuccess;
}

void release(void* user) {
  InterHostState* st = static_cast<InterHostState*>(user);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && st->comm != MPI_COMM_NULL) MPI_Comm_free(&st->comm);
  if (st->abandoned) {
    // A receive matched before the exchange gave up may still land in its scratch: keep it.
    static std::mutex mutex;
    static auto* kept = new std::vector<std::vector<unsigned char>>;
    std::lock_guard<std::mutex> lock(mutex);
    for (std::vector<unsigned char>& w : st->wrong_length) kept->push_back(std::move(w));
  }
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
  // The comm's ranks are mpi_comm's (symmarCommInitMpi): messages name each host's member by it.
  st->comm_ranks.assign(static_cast<size_t>(hosts), -1);
  int split_size = 0;
  MPI_Comm_size(st->comm, &split_size);
  if (split_size == hosts) {  // else the hosts are unequal: the engine is refused below
    std::vector<int> by_host(static_cast<size_t>(hosts));
    for (int h = 0; h < hosts; ++h) by_host[static_cast<size_t>(h)] = h;
    MPI_Group split_group, group;
    MPI_Comm_group(st->comm, &split_group);
    MPI_Comm_group(mpi_comm, &group);
    MPI_Group_translate_ranks(split_group, hosts, by_host.data(), group, st->comm_ranks.data());
    MPI_Group_free(&split_group);
    MPI_Group_free(&group);
  }
  res = symmarCommSetInterHost(comm, exchange, release, st, "mpi");
  if (res == symmarSuccess) return res;
  release(st);
  return res == symmarUnsupported ? symmarSuccess : res;  // unequal hosts: the comm stays flat
}

}  // namespace symmar_mpi

// Wraps every C entry point: no exception crosses the ABI, and a failure's detail text lands in
// the comm's last error (and the thread's, for calls without a comm).
#pragma once
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

#include "api/comm.h"
#include "core/error.h"

namespace symmar {

constexpr uint64_t kCommMagic = 0x73796d6d6172636full;

/// A C enum argument as the int the caller passed. C callers may pass any int; loading an
/// out-of-range value as a C++ enum would be undefined, so validation reads the raw bits.
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized on supported ABIs");
  int v;
  memcpy(&v, &e, sizeof(v));
  return v;
}

template <typename F>
symmarResult_t guarded(symmarComm* comm, F&& body) {
  clearThreadLastError();
  symmarResult_t res;
  try {
    res = body();
  } catch (const std::bad_alloc&) {
    res = fail(symmarOutOfMemory, "out of host memory");
  } catch (const std::exception& e) {
    res = fail(symmarInternalError, "internal error: %s", e.what());
  } catch (...) {
    res = fail(symmarInternalError, "internal error (unknown exception)");
  }
  if (res != symmarSuccess && comm) {
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    comm->last_error = threadLastError();
  }
  return res;
}

/// Holds a comm for the length of one entry point: fails with symmarInvalidUsage when the comm is
/// destroyed or being destroyed, and makes a concurrent symmarCommDestroy fail instead of freeing
/// the comm under the call. (users is raised before magic is read; destroy clears magic before it
/// reads users: with sequentially consistent atomics at least one side sees the other.)
class CommUse {
 public:
  explicit CommUse(symmarComm* comm);
  ~CommUse() {
    if (comm_) comm_->users.fetch_sub(1, std::memory_order_release);
  }
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;
  symmarResult_t result() const { return result_; }

 private:
  symmarComm* comm_ = nullptr;
  symmarResult_t result_ = symmarSuccess;
};

/// Checks that a live comm is usable for a collective: not failed by an earlier timeout or peer loss.
symmarResult_t checkComm(symmarComm* comm);

/// guarded() for an entry point that takes a comm: the comm must be live for the whole call.
template <typename F>
symmarResult_t guardedComm(symmarComm* comm, F&& body) {
  return guarded(comm, [&] {
    CommUse use(comm);
    SYMMAR_CHECK(use.result());
    return body();
  });
}

/// guardedComm() for a collective (or anything that must not run on a failed comm): the comm must
/// also be usable (checkComm).
template <typename F>
symmarResult_t guardedCollective(symmarComm* comm, F&& body) {
  return guardedComm(comm, [&] {
    SYMMAR_CHECK(checkComm(comm));
    return body();
  });
}
/// Empties a destroyed comm and keeps it allocated for the next 1,024 destroys, so a stale handle
/// gets symmarInvalidUsage instead of touching freed memory.
void buryComm(symmarComm* comm);
/// Records a timeout or peer failure: the comm stays failed.
void noteFailure(symmarComm* comm, symmarResult_t res);

}  // namespace symmar

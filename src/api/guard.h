// Wraps every C entry point: no exception crosses the ABI, and a failure's detail text lands in
// the comm's last error (and the thread's, for calls without a comm).
#pragma once
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

#include "core/comm.h"
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

/// Checks that comm is usable for a call: not NULL, and not failed by an earlier timeout or peer loss.
symmarResult_t checkComm(symmarComm* comm);
/// Records a timeout or peer failure: the comm stays failed.
void noteFailure(symmarComm* comm, symmarResult_t res);

}  // namespace symmar

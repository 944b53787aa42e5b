// Error reporting inside the library: a failing function records a detail text for the calling
// thread and returns its code; the API layer copies the text into the comm it was called on.
#pragma once
#include <cstdio>
#include <string>

#include "symmar/symmar.h"

namespace symmar {

/// Records a printf-style detail as the calling thread's last error and returns code.
symmarResult_t fail(symmarResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/// The calling thread's last error text ("" if none).
const std::string& threadLastError();
void clearThreadLastError();
/// Logs "file:line -> code" at TRACE, so a failure's path up the call stack can be followed.
void traceCheckFailed(const char* file, int line, symmarResult_t code);

}  // namespace symmar

/// Returns early with the result of expr when it is not symmarSuccess (each level of the return
/// path logs its file:line at TRACE).
#define SYMMAR_CHECK(expr)                                           \
  do {                                                               \
    symmarResult_t symmar_res_ = (expr);                             \
    if (symmar_res_ != symmarSuccess) {                              \
      ::symmar::traceCheckFailed(__FILE__, __LINE__, symmar_res_);   \
      return symmar_res_;                                            \
    }                                                                \
  } while (0)

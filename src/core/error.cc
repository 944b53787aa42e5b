#include "core/error.h"

#include <cstdarg>
#include <cstdio>

#include "core/log.h"

namespace symmar {
namespace {
thread_local std::string t_last_error;
}

symmarResult_t fail(symmarResult_t code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  t_last_error = buf;
  logf(LogLevel::kInfo, kSubsysAll, "error %s: %s", symmarGetErrorString(code), buf);
  return code;
}

void traceCheckFailed(const char* file, int line, symmarResult_t code) {
  if (!logEnabled(LogLevel::kTrace, kSubsysAll)) return;
  logf(LogLevel::kTrace, kSubsysAll, "%s:%d -> %s", file, line, symmarGetErrorString(code));
}

const std::string& threadLastError() { return t_last_error; }
void clearThreadLastError() { t_last_error.clear(); }

}  // namespace symmar

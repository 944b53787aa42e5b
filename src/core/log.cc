#include "core/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/env.h"

namespace symmar {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  uint32_t subsys = kSubsysAll;
  FILE* out = stderr;
  char host[64] = "";
};

std::mutex g_mutex;
LogConfig g_config;
bool g_loaded = false;
thread_local int t_rank = -1;

uint32_t parseSubsys(const char* text) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {{"INIT", kSubsysInit}, {"PLAN", kSubsysPlan}, {"BOOT", kSubsysBoot}, {"HEAP", kSubsysHeap},
                {"COLL", kSubsysColl}, {"ENV", kSubsysEnv},   {"GPU", kSubsysGpu},   {"ALL", kSubsysAll}};
  uint32_t mask = 0;
  std::string list(text);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    bool found = false;
    for (const auto& n : kNames) {
      if (strcasecmp(item.c_str(), n.name) == 0) {
        mask |= n.bit;
        found = true;
      }
    }
    if (!found) return 0;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return mask;
}

FILE* openLogFile(const char* pattern, const char* host) {
  std::string name;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      name += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      name += std::to_string(getpid());
      ++p;
    } else {
      name += *p;
    }
  }
  return fopen(name.c_str(), "a");
}

// Called with g_mutex held. Bad values are reported after the config is usable.
void loadLocked() {
  if (g_loaded) return;
  g_loaded = true;
  gethostname(g_config.host, sizeof(g_config.host) - 1);
  const char* bad_level = nullptr;
  const char* bad_subsys = nullptr;
  if (const char* level = envRaw("SYMMAR_DEBUG")) {
    if (strcasecmp(level, "WARN") == 0) g_config.level = LogLevel::kWarn;
    else if (strcasecmp(level, "INFO") == 0) g_config.level = LogLevel::kInfo;
    else if (strcasecmp(level, "TRACE") == 0) g_config.level = LogLevel::kTrace;
    else if (strcasecmp(level, "NONE") == 0) g_config.level = LogLevel::kNone;
    else bad_level = level;
  }
  if (const char* subsys = envRaw("SYMMAR_DEBUG_SUBSYS")) {
    uint32_t mask = parseSubsys(subsys);
    if (mask) g_config.subsys = mask;
    else bad_subsys = subsys;
  }
  if (const char* file = envRaw("SYMMAR_DEBUG_FILE")) {
    if (FILE* f = openLogFile(file, g_config.host)) {
      setvbuf(f, nullptr, _IOLBF, 0);
      g_config.out = f;
    }
  }
  if (bad_level || bad_subsys) {
    g_mutex.unlock();
    if (bad_level) envReportBad("SYMMAR_DEBUG", bad_level, "expected WARN, INFO or TRACE");
    if (bad_subsys) envReportBad("SYMMAR_DEBUG_SUBSYS", bad_subsys, "unknown subsystem name");
    g_mutex.lock();
  }
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "NONE";
  }
}

}  // namespace

bool logEnabled(LogLevel level, uint32_t subsys) {
  std::lock_guard<std::mutex> lock(g_mutex);
  loadLocked();
  if (level > g_config.level) return false;
  return level == LogLevel::kWarn || (g_config.subsys & subsys) != 0;
}

void logf(LogLevel level, uint32_t subsys, const char* fmt, ...) {
  if (!logEnabled(level, subsys)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_mutex);
  long tid = syscall(SYS_gettid);
  if (t_rank >= 0) {
    fprintf(g_config.out, "%s:%d:%ld [%d] symmar %s %s\n", g_config.host, getpid(), tid, t_rank, levelName(level), msg);
  } else {
    fprintf(g_config.out, "%s:%d:%ld [-] symmar %s %s\n", g_config.host, getpid(), tid, levelName(level), msg);
  }
}

void setLogRank(int rank) { t_rank = rank; }

void reloadLogConfig() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_config.out != stderr) fclose(g_config.out);
  g_config = LogConfig();
  g_loaded = false;
  loadLocked();
}

}  // namespace symmar

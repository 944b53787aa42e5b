// The one logger: lines "host:pid:tid [rank] symmar LEVEL msg" to stderr or SYMMAR_DEBUG_FILE,
// filtered by SYMMAR_DEBUG (level) and SYMMAR_DEBUG_SUBSYS (subsystems).
#pragma once
#include <cstdint>
#include <cstdio>

namespace symmar {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum LogSubsys : uint32_t {
  kSubsysInit = 1u << 0,
  kSubsysPlan = 1u << 1,
  kSubsysBoot = 1u << 2,
  kSubsysHeap = 1u << 3,
  kSubsysColl = 1u << 4,
  kSubsysEnv = 1u << 5,
  kSubsysGpu = 1u << 6,
  kSubsysAll = ~0u,
};

/// True when a message of this level and subsystem would be written (cheap; use to skip formatting).
bool logEnabled(LogLevel level, uint32_t subsys);
void logf(LogLevel level, uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/// Rank shown in this thread's log lines (-1: none).
void setLogRank(int rank);
/// Re-reads the logging variables (tests).
void reloadLogConfig();

}  // namespace symmar

#define SYMMAR_WARN(subsys, ...) ::symmar::logf(::symmar::LogLevel::kWarn, (subsys), __VA_ARGS__)
#define SYMMAR_INFO(subsys, ...) ::symmar::logf(::symmar::LogLevel::kInfo, (subsys), __VA_ARGS__)
#define SYMMAR_TRACE(subsys, ...) ::symmar::logf(::symmar::LogLevel::kTrace, (subsys), __VA_ARGS__)

#include "core/env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "core/log.h"

namespace symmar {
namespace {

const EnvVarInfo kRegistry[] = {
    {"SYMMAR_ALGO", "auto|oneshot|twoshot|multimem|nccl|mpi", "auto",
     "Forces one algorithm for symmarAllReduce (symmarAllReduceAlgo still wins)."},
    {"SYMMAR_DISABLE", "comma list of oneshot,twoshot,multimem,nccl,mpi", "(none)",
     "Algorithms the planner must never pick."},
    {"SYMMAR_TABLE_FILE", "path to a JSON table file", "(built-in tables)",
     "Rows that add to or override the built-in tables; config.table_file takes precedence."},
    {"SYMMAR_DEBUG", "WARN|INFO|TRACE", "WARN", "Log level."},
    {"SYMMAR_DEBUG_SUBSYS", "comma list of INIT,PLAN,BOOT,HEAP,COLL,ENV,GPU,ALL", "ALL",
     "Subsystems that log (warnings always print)."},
    {"SYMMAR_DEBUG_FILE", "file name; %h = host, %p = pid", "(stderr)", "Where log lines go."},
    {"SYMMAR_SOCKET_IFNAME", "network interface name", "lo",
     "Interface whose IPv4 address symmarGetUniqueId listens on."},
    {"SYMMAR_SOCKET_ADDR", "IPv4 address", "(from SYMMAR_SOCKET_IFNAME)",
     "Address symmarGetUniqueId listens on; overrides SYMMAR_SOCKET_IFNAME."},
    {"SYMMAR_TIMEOUT_MS", "positive integer", "30000", "Default bound on every wait when config.timeout_ms is 0."},
    {"SYMMAR_STAGING_BYTES", "size with K/M/G suffix", "32M on the host backend, 8M on GPUs",
     "Default staging buffer per rank when config.staging_bytes is 0."},
    {"SYMMAR_HOST_CHUNK_BYTES", "size with K/M/G suffix", "256K",
     "Host backend: largest chunk one barrier step moves (smaller keeps the working set in cache)."},
    {"SYMMAR_HOST_SPIN", "non-negative integer", "4096 (16 when ranks outnumber cores)",
     "Host backend: busy polls of a barrier flag before the wait starts yielding the core."},
    {"SYMMAR_HEAP_BYTES", "size with K/M/G suffix", "256M", "Capacity of the symmetric heap for symmarMemAlloc."},
    {"SYMMAR_NCCL_LIB", "path to libnccl.so.2", "libnccl.so.2", "NCCL library loaded for the nccl fallback."},
    {"SYMMAR_EPOCH_START", "unsigned 32-bit integer", "0",
     "First barrier epoch of new comms; set near 4294967295 to exercise epoch wrap (testing)."},
};

std::mutex g_bad_mutex;
std::set<std::string> g_reported;

}  // namespace

const EnvVarInfo* envRegistry(size_t* count) {
  *count = sizeof(kRegistry) / sizeof(kRegistry[0]);
  return kRegistry;
}

const char* envRaw(const char* name) {
  bool known = false;
  for (const EnvVarInfo& v : kRegistry) known = known || strcmp(v.name, name) == 0;
  if (!known) return nullptr;
  const char* value = getenv(name);
  return (value && *value) ? value : nullptr;
}

void envReportBad(const char* name, const char* value, const char* why) {
  std::lock_guard<std::mutex> lock(g_bad_mutex);
  if (!g_reported.insert(std::string(name) + "=" + value).second) return;
  SYMMAR_WARN(kSubsysEnv, "ignoring %s=%s: %s", name, value, why);
}

bool parseSize(const char* text, int64_t* value) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || v < 0) return false;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) ++end;
  if (*end != '\0') return false;
  if (shift && v > (INT64_MAX >> shift)) return false;
  *value = static_cast<int64_t>(v) << shift;
  return true;
}

int64_t envInt(const char* name, int64_t def, int64_t min_value, int64_t max_value) {
  const char* raw = envRaw(name);
  if (!raw) return def;
  int64_t v = 0;
  if (!parseSize(raw, &v)) {
    envReportBad(name, raw, "not a non-negative integer");
    return def;
  }
  if (v < min_value || v > max_value) {
    envReportBad(name, raw, "out of range");
    return def;
  }
  return v;
}

}  // namespace symmar

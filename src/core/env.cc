#include "core/env.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "core/log.h"

namespace symmar {
namespace {

constexpr int64_t kNone = 0;
constexpr int64_t kTiB = int64_t{1} << 40;
constexpr EnvKind kText = EnvKind::kText;
constexpr EnvKind kInteger = EnvKind::kInteger;
constexpr EnvKind kSize = EnvKind::kSize;

const EnvVarInfo kRegistry[] = {
    {"SYMMAR_ALGO", "auto|oneshot|twoshot|multimem|nccl|mpi|lamport", "auto",
     "Forces one algorithm for symmarAllReduce (symmarAllReduceAlgo still wins).", kText, kNone, kNone, kNone},
    {"SYMMAR_DISABLE", "comma list of oneshot,twoshot,multimem,nccl,mpi,lamport", "(none)",
     "Algorithms the planner must never pick.", kText, kNone, kNone, kNone},
    {"SYMMAR_TABLE_FILE", "path to a JSON table file", "(built-in tables)",
     "Rows that add to or override the built-in tables; config.table_file takes precedence.", kText, kNone, kNone,
     kNone},
    {"SYMMAR_DEBUG", "WARN|INFO|TRACE", "WARN", "Log level.", kText, kNone, kNone, kNone},
    {"SYMMAR_DEBUG_SUBSYS", "comma list of INIT,PLAN,BOOT,HEAP,COLL,ENV,GPU,ALL", "ALL",
     "Subsystems that log (warnings always print).", kText, kNone, kNone, kNone},
    {"SYMMAR_DEBUG_FILE", "file name; %h = host, %p = pid", "(stderr)", "Where log lines go.", kText, kNone, kNone,
     kNone},
    {"SYMMAR_SOCKET_IFNAME", "network interface name", "lo",
     "Interface whose IPv4 address symmarGetUniqueId listens on.", kText, kNone, kNone, kNone},
    {"SYMMAR_SOCKET_ADDR", "IPv4 address", "(from SYMMAR_SOCKET_IFNAME)",
     "Address symmarGetUniqueId listens on; overrides SYMMAR_SOCKET_IFNAME.", kText, kNone, kNone, kNone},
    {"SYMMAR_TIMEOUT_MS", "integer 1..2147483647", "30000", "Default bound on every wait when config.timeout_ms is 0.",
     kInteger, 30000, 1, INT32_MAX},
    {"SYMMAR_STAGING_BYTES", "size 4K..1T with K/M/G suffix", "32M on the host backend, 8M on GPUs",
     "Default staging buffer per rank when config.staging_bytes is 0 (GPUs use at least 64K); ranks use the "
     "smallest any of them asks for.",
     kSize, 32 << 20, 4096, kTiB},
    // 1M chunks: few barrier steps, and a step's traffic (about 3 chunks per rank) still in the
    // last-level cache; 2.9-3.1x faster than 256K at 1 MiB on a 2-rank EPYC VM (docs/performance/host-allreduce.md).
    {"SYMMAR_HOST_CHUNK_BYTES", "size 4K..1T with K/M/G suffix", "1M",
     "Host backend: largest chunk one barrier step moves (smaller keeps the working set in cache).", kSize, 1 << 20,
     4096, kTiB},
    {"SYMMAR_HOST_THREADS", "integer 1..64", "1",
     "Host backend: threads a rank runs the copies and reductions of a two-shot allreduce, a reduce-scatter, an "
     "all-gather and the fused allreduce + add + RMSNorm on (itself and helpers, "
     "which inherit its CPU affinity), for steps of at least 64 KiB a thread; the rank's own choice (the same "
     "bits either way). For ranks that each have several cores, as engines' CPU allreduces use their OpenMP "
     "threads; symmarCommSetHostThreads sets it on a comm, or hands the steps to the engine's own pool.",
     kInteger, 1, 1, 64},
    {"SYMMAR_HOST_SPIN", "integer 0..1073741824", "4096 (16 when ranks outnumber cores)",
     "Host backend: busy polls of a barrier flag before the wait starts yielding the core.", kInteger, 4096, 0,
     1 << 30},
    {"SYMMAR_HOST_CMA", "0 or 1", "1",
     "Host backend: an all-gather's peers copy a rank's send buffer straight from its process (Linux cross-memory "
     "attach), where every rank's probe at comm creation reads its peers (same user and pid namespace; under Yama "
     "ptrace_scope 1 each rank process first lets processes of its user read it, prctl PR_SET_PTRACER_ANY, as Open "
     "MPI does); 0 stages it, and a rank with 0 leaves Yama's rule alone. Off when any rank asks.",
     kInteger, 1, 0, 1},
    {"SYMMAR_HOST_STREAM", "0, 1 or 2", "2",
     "Host backend: how a collective writes what its peers read from staging: 0 plain stores, 1 non-temporal "
     "(streaming) stores, 2 plain stores, streaming for the next 64 chunks after two plain staging writes in a row "
     "of 4 KiB or more ran at under 4 GB/s (the writer's core taking lines back from a peer's cache, which some "
     "machines make 10x dearer at times), then one plain try, after which a slow try streams twice as long as "
     "the run before it (up to 1024 chunks) and a fast one ends the streaming. Each rank's own choice.",
     kInteger, 2, 0, 2},
    {"SYMMAR_HOST_STAGING_RING", "0 or 1", "1 (0 when ranks outnumber cores)",
     "Host backend: an allreduce (one-shot or two-shot), fused call, reduce-scatter or staged all-gather that "
     "stages 8 KiB to 1 MiB stages each call in the next slot of a 4 MiB ring instead of at the start of its "
     "staging half, so a rank does not write lines a peer has just read; 0 keeps every call at the start. Off "
     "when any rank asks.",
     kInteger, 1, 0, 1},
    {"SYMMAR_HEAP_BYTES", "size 0..1T with K/M/G suffix", "256M",
     "Capacity of the symmetric heap for symmarMemAlloc; ranks use the smallest any of them asks for.", kSize,
     256 << 20, 0, kTiB},
    {"SYMMAR_NCCL_LIB", "path to libnccl.so.2", "libnccl.so.2", "NCCL library loaded for the nccl fallback.", kText,
     kNone, kNone, kNone},
    {"SYMMAR_P2P", "probe|trust|off", "probe",
     "GPUs linked by PCIe: probe checks at comm creation that peer access delivers what it claims (a broken pair "
     "moves the kernels' staging to pinned host memory), trust skips the check, off never uses peer access (host "
     "memory from the start). Ranks use the most careful mode any of them asks for.",
     kText, kNone, kNone, kNone},
    {"SYMMAR_PDL", "0 or 1", "1",
     "GPU kernels on sm_90+ launch with programmatic dependent launch: a kernel starts while the one before it "
     "ends and waits on the device before its first read of input. Where ranks share a GPU the block cap counts two "
     "grids per rank.",
     kInteger, 1, 0, 1},
    {"SYMMAR_FUSED_ROW_PARTS", "1 to 8", "8",
     "GPU fused allreduce + residual add + RMSNorm with fewer rows than the grid may have blocks: the most blocks one "
     "row is spread over (1: a block a row). Ranks use the smallest value any of them asks for.",
     kInteger, 8, 1, 8},
    {"SYMMAR_HOST_ID", "any text", "(hostname and boot id)",
     "Which host this rank counts as: ranks share memory only with ranks of the same host id, and a comm spanning "
     "several ids runs hierarchically (set per rank to test several hosts on one machine: scripts/sim-hosts.sh).",
     kText, kNone, kNone, kNone},
    {"SYMMAR_VLLM", "0 or 1", "0",
     "Read by the vLLM plugin (symmar.integrations.vllm, loaded by vLLM in every process): 1 routes the "
     "tensor-parallel allreduce of vLLM's CPU workers through symmar where its plan takes the size; 0 leaves vLLM "
     "untouched. Part of vLLM's compile cache key either way.",
     kText, kNone, kNone, kNone},
    {"SYMMAR_VLLM_FUSE", "0 or 1", "1",
     "Read by the vLLM plugin with SYMMAR_VLLM=1: 1 gives vLLM's CPU compilation symmar's graph pass "
     "(symmar.integrations.fusion) that fuses each allreduce with the residual add and RMSNorm after it; 0 keeps "
     "them apart.",
     kText, kNone, kNone, kNone},
    {"SYMMAR_SGLANG", "0 or 1", "0",
     "Read by the SGLang plugin (symmar.integrations.sglang, loaded by SGLang's load_plugins in every process): 1 "
     "hooks SGLang's GroupCoordinator so that its tensor-parallel allreduce goes through symmar where its plan "
     "takes the tensor; 0 registers no hook.",
     kText, kNone, kNone, kNone},
    {"SYMMAR_EPOCH_START", "integer 0..4294967295", "0",
     "First barrier epoch and call number of new comms (rank 0's value; on the GPU the call number counts lamport "
     "calls); set near 4294967295 to exercise their wrap (testing).",
     kInteger, 0, 0, UINT32_MAX},
};

std::mutex g_bad_mutex;
std::set<std::string> g_reported;

}  // namespace

const EnvVarInfo* envRegistry(size_t* count) {
  *count = sizeof(kRegistry) / sizeof(kRegistry[0]);
  return kRegistry;
}

const EnvVarInfo* envInfo(const char* name) {
  for (const EnvVarInfo& v : kRegistry) {
    if (strcmp(v.name, name) == 0) return &v;
  }
  return nullptr;
}

const char* envRaw(const char* name) {
  if (!envInfo(name)) return nullptr;
  const char* value = getenv(name);
  return (value && *value) ? value : nullptr;
}

int64_t envNumber(const char* name) {
  const EnvVarInfo* v = envInfo(name);
  return v ? envNumber(name, v->def) : 0;
}

int64_t envNumber(const char* name, int64_t def) {
  const EnvVarInfo* v = envInfo(name);
  if (!v || v->kind == EnvKind::kText) return def;
  return envInt(name, def, v->min, v->max);
}

void envLogSet() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const EnvVarInfo& v : kRegistry) {
      if (const char* value = envRaw(v.name)) SYMMAR_INFO(kSubsysEnv, "%s=%s", v.name, value);
    }
  });
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

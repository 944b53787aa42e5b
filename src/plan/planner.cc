#include "plan/planner.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/names.h"
#include "core/schedule.h"
#include "plan/algorithms.h"

namespace symmar {
namespace {

PlanEnv parsePlanEnv() {
  PlanEnv env;
  if (const char* algo = envRaw("SYMMAR_ALGO")) {
    symmarAlgo_t a;
    if (parseAlgoName(algo, &a)) env.forced = a;
    else envReportBad("SYMMAR_ALGO", algo, "unknown algorithm name");
  }
  if (const char* list = envRaw("SYMMAR_DISABLE")) {
    uint32_t mask = 0;
    if (parseAlgoList(list, &mask)) env.disabled = mask;
    else envReportBad("SYMMAR_DISABLE", list, ("expected a comma list of " + algoNameList(",")).c_str());
  }
  return env;
}

std::mutex g_env_mutex;
PlanEnv g_env;
std::atomic<bool> g_env_loaded{false};  // read on every allreduce: no lock once loaded
std::atomic<uint32_t> g_env_generation{1};

std::mutex g_tables_mutex;
Tables* g_tables = nullptr;
symmarResult_t g_tables_status = symmarSuccess;
std::string g_tables_error;
bool g_tables_loaded = false;

}  // namespace

uint32_t availableAlgos(const symmarTopology_t& topo, symmarDataType_t dtype, symmarRedOp_t op, uint32_t fallbacks) {
  return availableAlgos(topo, Request{dtype, op, 0}, fallbacks);
}

uint32_t availableAlgos(const symmarTopology_t& topo, const Request& request, uint32_t fallbacks) {
  // refusalOf for every algorithm, size aside, written out: one lookup of each algorithm's record
  // and of the environment per algorithm is measurable against a sub-microsecond host call.
  Request sizeless = request;
  sizeless.bytes = 0;
  const uint32_t disabled = planEnv().disabled;
  uint32_t mask = 0;
  size_t n = 0;
  const AlgorithmTraits* traits = algorithmTraitsTable(&n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bit = algoBit(traits[i].algo);
    if (!(disabled & bit) && traits[i].can_implement(topo, sizeless, fallbacks) == Refusal::kNone) mask |= bit;
  }
  return mask;
}

uint32_t AvailableAlgos::of(const symmarTopology_t& topo, const Request& request, uint32_t fallbacks) {
  // An entry: the mask (low 32 bits), the fallbacks it was computed for (8 bits: algoBit of nccl
  // and mpi), the environment's generation (23 bits), and a bit that says it was computed.
  constexpr uint64_t kComputed = 1ull << 63;
  const uint64_t key = kComputed | (static_cast<uint64_t>(planEnvGeneration() & 0x7fffffu) << 40) |
                       (static_cast<uint64_t>(fallbacks & 0xffu) << 32);
  const int c = static_cast<int>(request.coll), d = static_cast<int>(request.dtype), o = static_cast<int>(request.op);
  const bool known = c >= 0 && c < kNumCollectives && d >= 0 && d < symmarNumTypes && o >= 0 && o < symmarNumOps &&
                     fallbacks <= 0xffu;
  if (!known) return availableAlgos(topo, request, fallbacks);
  std::atomic<uint64_t>& entry = entries_[c][d][o];
  const uint64_t seen = entry.load(std::memory_order_relaxed);
  if ((seen & ~0xffffffffull) == key) return static_cast<uint32_t>(seen);
  const uint32_t mask = availableAlgos(topo, request, fallbacks);
  entry.store(key | mask, std::memory_order_relaxed);
  return mask;
}

void AvailableAlgos::forget() {
  for (auto& per_coll : entries_) {
    for (auto& per_dtype : per_coll) {
      for (std::atomic<uint64_t>& entry : per_dtype) entry.store(0, std::memory_order_relaxed);
    }
  }
}

Refusal refusalOf(symmarAlgo_t algo, const symmarTopology_t& topo, const Request& request, uint32_t fallbacks) {
  const Refusal why = canImplement(algo, topo, request, fallbacks);
  if (why != Refusal::kNone) return why;
  return validAlgo(algo) && (planEnv().disabled & algoBit(algo)) ? Refusal::kDisabled : Refusal::kNone;
}

symmarAlgo_t chooseAlgo(const TableRow& row, uint32_t available, size_t bytes, size_t elem_bytes) {
  // An unavailable multimem gives way to the form that needs the same peer access: two-shot for an
  // allreduce, one-shot for a reduce-scatter or all-gather (two-shot is itself those two).
  const symmarAlgo_t instead_of_multimem = row.coll == Collective::kAllReduce ? symmarAlgoTwoShot : symmarAlgoOneShot;
  auto servable = [available, bytes, instead_of_multimem](symmarAlgo_t a) {
    if (a == symmarAlgoMultimem && !(available & algoBit(a))) a = instead_of_multimem;
    const uint64_t limit = algorithmTraits(a).max_bytes;
    if (limit != 0 && bytes > limit) return symmarAlgoAuto;  // lamport's buffers hold 256 KiB
    return (available & algoBit(a)) ? a : symmarAlgoAuto;
  };
  for (int i = 0; i < row.num_entries; ++i) {
    if (bytes > row.entries[i].max_bytes || !entryServes(row.entries[i], elem_bytes)) continue;
    symmarAlgo_t a = servable(row.entries[i].algo);
    if (a != symmarAlgoAuto) return a;
  }
  if (available & algoBit(symmarAlgoNccl)) return symmarAlgoNccl;
  if (available & algoBit(symmarAlgoMpi)) return symmarAlgoMpi;
  for (int i = row.num_entries - 1; i >= 0; --i) {
    if (!entryServes(row.entries[i], elem_bytes)) continue;
    symmarAlgo_t a = servable(row.entries[i].algo);
    if (a != symmarAlgoAuto) return a;
  }
  if (available & algoBit(symmarAlgoTwoShot)) return symmarAlgoTwoShot;
  if (available & algoBit(symmarAlgoOneShot)) return symmarAlgoOneShot;
  return symmarAlgoAuto;
}

symmarAlgo_t planAddRmsNorm(const TableRow& allreduce_row, const TableRow& fused_row, const symmarTopology_t& topo,
                            uint32_t fallbacks, size_t tokens, size_t hidden, symmarDataType_t dtype,
                            size_t rows_cap) {
  const uint32_t available = availableAlgos(topo, dtype, symmarSum, fallbacks);
  const bool one = available & algoBit(symmarAlgoOneShot);
  const bool two = available & algoBit(symmarAlgoTwoShot);
  if (!one && !two) return symmarAlgoAuto;
  // More rows than the fused kernel's blocks: its blocks run rows one after another, each a chain of
  // waits, and on a GPU it took 2.1-2.5x the unfused call at 64 tokens (docs/gpu-results.md).
  if (rows_cap != 0 && tokens > rows_cap) return symmarAlgoAuto;
  const size_t elem = symmarTypeSize(dtype);
  const uint64_t bytes = static_cast<uint64_t>(tokens) * hidden * elem;
  // The lamport form (GPU kernels only) where the first entry that holds the call names it.
  const bool lamport = (available & algoBit(symmarAlgoLamport)) && topo.link != symmarLinkHostMemory &&
                       sched::lamportFusedFits(tokens, hidden, elem);
  for (int i = 0; lamport && i < fused_row.num_entries; ++i) {
    if (bytes > fused_row.entries[i].max_bytes || !entryServes(fused_row.entries[i], elem)) continue;
    if (fused_row.entries[i].algo == symmarAlgoLamport) return symmarAlgoLamport;
    break;
  }
  // Past the row's last threshold for this dtype the unfused calls serve, however few the tokens:
  // the row was measured against them.
  uint64_t last_threshold = 0;
  int entries_for_dtype = 0;
  for (int i = 0; i < fused_row.num_entries; ++i) {
    if (!entryServes(fused_row.entries[i], elem)) continue;
    last_threshold = fused_row.entries[i].max_bytes;
    ++entries_for_dtype;
  }
  if (entries_for_dtype > 0 && bytes > last_threshold) return symmarAlgoAuto;
  if (!two) return symmarAlgoOneShot;
  const bool few_rows = tokens < static_cast<size_t>(topo.world_size);
  // Whether the allreduce of these bytes is itself a one-shot (each rank reads every peer's whole
  // message); planned only where it decides.
  const symmarAlgo_t plain = entries_for_dtype == 0 || few_rows
                                 ? planRequest(allreduce_row, topo, fallbacks, tokens * hidden, dtype, symmarSum)
                                 : symmarAlgoAuto;
  const bool plain_one_shot = one && (plain == symmarAlgoOneShot || plain == symmarAlgoLamport);
  symmarAlgo_t form = symmarAlgoAuto;
  for (int i = 0; i < fused_row.num_entries && form == symmarAlgoAuto; ++i) {
    const TableEntry& e = fused_row.entries[i];
    if (bytes <= e.max_bytes && entryServes(e, elem) && e.algo != symmarAlgoLamport && (available & algoBit(e.algo))) {
      form = e.algo;
    }
  }
  // No entry serves: without a row, the allreduce's row decides; with one, the entries that hold the
  // call are disabled here, and the two-shot (available) takes it.
  if (form == symmarAlgoAuto) {
    form = entries_for_dtype == 0 && plain_one_shot ? symmarAlgoOneShot : symmarAlgoTwoShot;
  }
  if (!few_rows || !one || form == symmarAlgoOneShot) return form;
  // Fewer rows than ranks, where the row or the allreduce says two-shot: the fused two-shot splits
  // by rows and would leave ranks without one, and the fused one-shot reads every peer's whole rows,
  // which is the one-shot's cost at a size where the allreduce splits the message. The allreduce
  // (its two-shot splits within rows), then the add and norm, serves: on the host at 2 ranks, 1 token
  // of 7168 bf16 took 7.7-9.3 us that way against 9.1-9.6 fused (symmar_norm_perf, 2026-12-06).
  return plain_one_shot ? symmarAlgoOneShot : symmarAlgoAuto;
}

symmarResult_t fitAddRmsNormForm(const AddRmsNormCall& call, const size_t row_bytes[2], size_t half,
                                 symmarAlgo_t* algo) {
  const bool one_fits = row_bytes[0] <= half, two_fits = row_bytes[1] <= half;
  // A planned two-shot gives way to the one-shot, whose rows are smaller: it runs if they fit, and
  // otherwise its need is the one to name (the least the half must hold for any form to serve).
  if (*algo == symmarAlgoTwoShot && !two_fits && call.planned) *algo = symmarAlgoOneShot;
  const bool two_shot = *algo == symmarAlgoTwoShot;
  if (two_shot ? two_fits : one_fits) return symmarSuccess;
  // A two-shot row holds at least a one-shot row (padded, or with what it publishes beside it), so
  // only a two-shot can fail where the other fits.
  const char* what = two_shot ? "what it stages and publishes of a row" : "the input row it stages";
  const char* remedy = two_shot && one_fits
                           ? "; the oneshot form fits (force symmarAlgoOneShot, or let the call choose)"
                           : ": raise the staging buffer (config.staging_bytes, SYMMAR_STAGING_BYTES)";
  return fail(symmarUnsupported,
              "the fused %s form needs %zu bytes of a staging half for each row (%s, %zu %s elements), and a half has "
              "%zu bytes%s",
              two_shot ? "twoshot" : "oneshot", row_bytes[two_shot ? 1 : 0], what, call.hidden, dtypeName(call.dtype),
              half, remedy);
}

const PlanEnv& planEnv() {
  if (g_env_loaded.load(std::memory_order_acquire)) return g_env;
  std::lock_guard<std::mutex> lock(g_env_mutex);
  if (!g_env_loaded.load(std::memory_order_relaxed)) {
    g_env = parsePlanEnv();
    g_env_loaded.store(true, std::memory_order_release);
  }
  return g_env;
}

uint32_t planEnvGeneration() {
  planEnv();  // the variables read, so a generation names what was read
  return g_env_generation.load(std::memory_order_acquire);
}

void reloadPlanEnv() {  // tests only: not safe while other threads plan
  std::lock_guard<std::mutex> lock(g_env_mutex);
  g_env_generation.fetch_add(1, std::memory_order_acq_rel);
  g_env_loaded.store(false, std::memory_order_release);
}

symmarResult_t processTables(const Tables** tables) {
  std::lock_guard<std::mutex> lock(g_tables_mutex);
  if (!g_tables_loaded) {
    g_tables_loaded = true;
    g_tables = new Tables(Tables::builtin());
    if (const char* file = envRaw("SYMMAR_TABLE_FILE")) {
      g_tables_status = g_tables->loadFile(file);
      if (g_tables_status != symmarSuccess) g_tables_error = threadLastError();
    }
  }
  if (g_tables_status != symmarSuccess) {
    *tables = nullptr;
    return fail(g_tables_status, "%s", g_tables_error.c_str());
  }
  *tables = g_tables;
  return symmarSuccess;
}

void resetProcessTables() {
  std::lock_guard<std::mutex> lock(g_tables_mutex);
  delete g_tables;
  g_tables = nullptr;
  g_tables_loaded = false;
  g_tables_status = symmarSuccess;
}

symmarAlgo_t planRequest(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks, size_t count,
                         symmarDataType_t dtype, symmarRedOp_t op) {
  return planRequest(row, topo, fallbacks, count, dtype, op, availableAlgos(topo, dtype, op, fallbacks));
}

symmarAlgo_t planRequest(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks, size_t count,
                         symmarDataType_t dtype, symmarRedOp_t op, uint32_t available) {
  const size_t bytes = count * symmarTypeSize(dtype);
  const symmarAlgo_t forced = planEnv().forced;
  if (forced != symmarAlgoAuto) {
    const Refusal why = refusalOf(forced, topo, {dtype, op, bytes}, fallbacks);
    if (why == Refusal::kNone) return forced;
    static std::atomic<int> noted{0};  // one line per reason is plenty
    if ((noted.fetch_or(1 << static_cast<int>(why)) & (1 << static_cast<int>(why))) == 0) {
      SYMMAR_INFO(kSubsysPlan, "SYMMAR_ALGO=%s cannot serve %s %s of %zu bytes on this comm (%s): the table chooses",
                  algoName(forced), dtypeName(dtype), opName(op), bytes, refusalText(why));
    }
  }
  return chooseAlgo(row, available, bytes, symmarTypeSize(dtype));
}

symmarAlgo_t planScatterGather(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks,
                               const Request& request) {
  return planScatterGather(row, topo, fallbacks, request, availableAlgos(topo, request, fallbacks));
}

symmarAlgo_t planScatterGather(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks,
                               const Request& request, uint32_t available) {
  const symmarAlgo_t forced = planEnv().forced;
  if (forced != symmarAlgoAuto && refusalOf(forced, topo, request, fallbacks) == Refusal::kNone) return forced;
  const size_t world = topo.world_size > 0 ? static_cast<size_t>(topo.world_size) : 1;
  const size_t whole = request.bytes > SIZE_MAX / world ? SIZE_MAX : request.bytes * world;  // the checks bound it
  return chooseAlgo(row, available, whole, symmarTypeSize(request.dtype));
}

void noteRowServed(int cc_major, int cc_minor, symmarLink_t link, const TableRow& row) {
  if (row.arch == archOf(cc_major, cc_minor) || row.arch == kArchHost) return;
  static std::mutex mutex;
  static std::set<std::pair<int, int>> logged;
  std::lock_guard<std::mutex> lock(mutex);
  if (!logged.insert({archOf(cc_major, cc_minor), static_cast<int>(link)}).second) return;
  SYMMAR_INFO(kSubsysPlan, "compute capability %d.%d has no %s row of its own: using the %s row (%s)", cc_major,
              cc_minor, linkName(link), archKeyName(row.arch).c_str(), row.source.c_str());
}

}  // namespace symmar

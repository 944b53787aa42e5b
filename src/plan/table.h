// Size tables: rows keyed by (collective, arch key, interconnect, world size, hosts), each an
// ordered list of (algorithm, max bytes), an entry possibly only for the wider dtypes. Above the
// last threshold that serves the call's dtype the fallback serves. An
// allreduce's bytes are its message; a reduce-scatter's and an all-gather's are the whole buffer
// (nranks blocks), as nccl-tests and symmar_perf count them. A comm spanning hosts is
// keyed by its ranks per host (world) and its number of hosts; its interconnect is the one within
// a host, and its entries name the hierarchical forms (oneshot = one-shot within each host, then
// the whole message between hosts; twoshot = reduce-scatter within, slices between, all-gather).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/call.h"
#include "symmar/symmar.h"

namespace symmar {

constexpr int kArchDefault = -1;  ///< the row every unknown GPU ends at
constexpr int kArchHost = 0;      ///< host backend rows (link = host memory)
constexpr int kMaxTableEntries = 4;
constexpr int kMinTableWorld = 2;
constexpr int kMaxTableWorld = 8;
constexpr int kMaxTableHosts = 8;  ///< rows exist for 1..8 hosts; more hosts use the 8-host row
constexpr uint64_t kUnbounded = UINT64_MAX;

struct TableEntry {
  symmarAlgo_t algo;
  uint64_t max_bytes;  ///< inclusive
  /// 0: every dtype. Else only dtypes whose elements have at least this many bytes: where a
  /// crossover follows the element count (the host's reductions, whose 16-bit conversions cost per
  /// element), the wider types keep an algorithm to a larger byte size.
  uint8_t min_elem_bytes = 0;
};

/// Whether entry e serves a dtype of elem_bytes bytes an element.
inline bool entryServes(const TableEntry& e, size_t elem_bytes) { return elem_bytes >= e.min_elem_bytes; }

struct TableRow {
  Collective coll = Collective::kAllReduce;
  int arch = kArchDefault;  ///< major*10 + minor (sm90 = 90, sm120 = 120), kArchHost or kArchDefault
  symmarLink_t link = symmarLinkUnknown;
  int world = 0;
  int hosts = 1;  ///< 1: a single-host comm
  int num_entries = 0;
  TableEntry entries[kMaxTableEntries] = {};
  std::string source;  ///< where the numbers come from
};

/// "sm90", "sm120", "host", "default".
std::string archKeyName(int arch);
/// Inverse of archKeyName. False if the text is no arch key.
bool parseArchKey(const char* text, int* arch);
/// Arch code of a compute capability (9.0 -> 90, 12.1 -> 121); kArchHost for 0.0.
inline int archOf(int cc_major, int cc_minor) { return cc_major * 10 + cc_minor; }

/// Largest table file read (a full set of rows is a few KiB).
constexpr size_t kMaxTableFileBytes = 1u << 20;

class Tables {
 public:
  /// The compiled-in rows (tables_builtin.cc).
  static const Tables& builtin();

  /// Adds or replaces rows from a JSON table file: a regular file of at most kMaxTableFileBytes
  /// (a FIFO or device is refused without blocking). On error the tables are unchanged and the
  /// thread's last error names the file, the field and the reason.
  symmarResult_t loadFile(const char* path);
  /// Same, from text; origin names the source in errors.
  symmarResult_t loadJson(const std::string& text, const char* origin);

  /// Adds a row, replacing one with the same key.
  void put(const TableRow& row);
  /// Exact key lookup; nullptr if absent.
  const TableRow* find(int arch, symmarLink_t link, int world, int hosts = 1,
                       Collective coll = Collective::kAllReduce) const;
  /// The lookup chain, per (collective, link, world, hosts): exact capability -> family (major, minor 0) ->
  /// default; host memory (or capability 0.0) -> host rows -> default. Rows may be sparse: any step
  /// may lack the key. World sizes outside 2..8 use the nearest row; more than 8 hosts use the
  /// 8-host rows, and a host count without rows the 2-host rows. Never returns nullptr: a key with
  /// no default row gets an empty row (fallback only: a comm spanning hosts without hierarchical
  /// rows runs flat). The served row's arch and hosts say which step answered.
  /// A collective without rows of its own on this key gets the empty row too.
  const TableRow* resolve(int cc_major, int cc_minor, symmarLink_t link, int world, int hosts = 1,
                          Collective coll = Collective::kAllReduce) const;
  const std::vector<TableRow>& rows() const { return rows_; }

 private:
  std::vector<TableRow> rows_;
};

}  // namespace symmar

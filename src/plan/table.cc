#include "plan/table.h"

#include <cstdlib>
#include <cstring>

namespace symmar {
namespace {

TableRow emptyRow(Collective coll) {
  TableRow r;
  r.coll = coll;
  r.source = "empty row: unknown interconnect, or no row for this collective or this many hosts (the fallback "
             "serves)";
  return r;
}

}  // namespace

std::string archKeyName(int arch) {
  if (arch == kArchDefault) return "default";
  if (arch == kArchHost) return "host";
  return "sm" + std::to_string(arch);
}

bool parseArchKey(const char* text, int* arch) {
  if (strcmp(text, "default") == 0) {
    *arch = kArchDefault;
    return true;
  }
  if (strcmp(text, "host") == 0) {
    *arch = kArchHost;
    return true;
  }
  if (strncmp(text, "sm", 2) != 0 || text[2] < '1' || text[2] > '9') return false;
  char* end = nullptr;
  long v = strtol(text + 2, &end, 10);
  if (*end != '\0' || v < 10 || v > 9999) return false;
  *arch = static_cast<int>(v);
  return true;
}

void Tables::put(const TableRow& row) {
  for (TableRow& existing : rows_) {
    if (existing.coll == row.coll && existing.arch == row.arch && existing.link == row.link &&
        existing.world == row.world && existing.hosts == row.hosts) {
      existing = row;
      return;
    }
  }
  rows_.push_back(row);
}

const TableRow* Tables::find(int arch, symmarLink_t link, int world, int hosts, Collective coll) const {
  for (const TableRow& row : rows_) {
    if (row.coll == coll && row.arch == arch && row.link == link && row.world == world && row.hosts == hosts) {
      return &row;
    }
  }
  return nullptr;
}

const TableRow* Tables::resolve(int cc_major, int cc_minor, symmarLink_t link, int world, int hosts,
                                Collective coll) const {
  const int w = world < kMinTableWorld ? kMinTableWorld : (world > kMaxTableWorld ? kMaxTableWorld : world);
  const int h = hosts < 1 ? 1 : (hosts > kMaxTableHosts ? kMaxTableHosts : hosts);
  const int arch = archOf(cc_major, cc_minor);
  const bool host = link == symmarLinkHostMemory || arch == kArchHost;
  for (int hk : {h, 2}) {
    if (hk != h && (h == 1 || h == 2)) break;  // the 2-host rows stand in only for other host counts
    if (host) {
      if (const TableRow* row = find(kArchHost, symmarLinkHostMemory, w, hk, coll)) return row;
    } else {
      if (const TableRow* row = find(arch, link, w, hk, coll)) return row;
      if (const TableRow* row = find(archOf(cc_major, 0), link, w, hk, coll)) return row;
    }
    if (const TableRow* row = find(kArchDefault, link, w, hk, coll)) return row;
  }
  // The built-in default rows cover every collective, link and world of a single host, so this is
  // reached only for an unknown link, a comm spanning hosts without rows of its own, or a table
  // without rows for a collective: an empty row, which leaves the decision to the fallback (flat).
  static const TableRow kEmpty[kNumCollectives] = {emptyRow(Collective::kAllReduce),
                                                   emptyRow(Collective::kReduceScatter),
                                                   emptyRow(Collective::kAllGather), emptyRow(Collective::kAddRmsNorm)};
  return &kEmpty[static_cast<int>(coll)];
}

}  // namespace symmar

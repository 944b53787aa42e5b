// Per-architecture traits: what symmar knows about a GPU architecture apart from its size tables.
// The data is one table, kArchTraits in arch.cc; adding an architecture is its rows in
// tables_builtin.cc plus, optionally, one traits line in arch.cc. Nothing here lists arches.
#pragma once
#include <vector>

#include "plan/table.h"

namespace symmar {

/// One line of the traits table.
struct ArchTraits {
  int arch;          ///< arch key as in TableRow::arch: major*10 + minor (sm90 = 90, sm121 = 121)
  int family;        ///< compute capability major: the lookup chain's family step (sm121 -> 12 -> sm120 rows)
  bool multimem;     ///< multimem / NVLink SHARP can exist on this arch (multicast still needs an NVSwitch)
  const char* name;  ///< products, for docs and logs ("H100 / H200")
};

/// The traits table (kArchTraits, arch.cc), in table order.
const std::vector<ArchTraits>& archTraitsTable();

/// Traits of exactly this arch key (no family fallback); nullptr if the table has no line for it.
const ArchTraits* archTraits(int arch);

/// Whether an architecture can run multimem. A known arch answers from its traits (RTX / GeForce
/// Blackwell, sm120 and sm121, cannot: no NVSwitch, no multicast); an unknown member of a known
/// family answers like the family (12.7 like sm120). Otherwise the PTX ISA rule, true iff
/// cc_major >= 9: multimem.* needs sm_90 or newer, and a new datacenter part is more likely than
/// not to keep it. That is only an upper bound: multicast is still checked on the
/// device (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED) and needs an NVSwitch link.
bool archSupportsMultimem(int cc_major, int cc_minor);

/// Every arch key present in t's rows or in the traits table, GPU arches ascending, then
/// kArchDefault, then kArchHost (the order docs/tables.md prints them in). A row keyed by an arch
/// the traits table does not know (a table file's "sm89") is included; that is how a new
/// architecture needs no code edit.
std::vector<int> knownArchs(const Tables& t);

}  // namespace symmar

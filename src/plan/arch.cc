#include "plan/arch.h"

#include <algorithm>
#include <iterator>

namespace symmar {
namespace {

// multimem (NVLink SHARP) needs both an sm_90+ GPU (PTX ISA, multimem.ld_reduce/st/red: "requires
// sm_90 or higher", PTX ISA 8.1) and NVSwitch multicast (CUDA driver API, Multicast Object
// Management, queried per device as CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED; NVLink SHARP is a
// function of the NVSwitch). The datacenter parts have both; RTX / GeForce Blackwell (sm120) and
// GB10 (sm121) have no NVLink to an NVSwitch, so no multicast, although they are sm_90+.
const ArchTraits kArchTraits[] = {
    // arch, family (major), multimem, products
    {90, 9, true, "H100 / H200"},
    {100, 10, true, "B200 / GB200"},
    {103, 10, true, "B300 / GB300"},
    {120, 12, false, "RTX PRO 6000 Blackwell / RTX 50"},
    {121, 12, false, "GB10 (DGX Spark)"},
};

}  // namespace

const std::vector<ArchTraits>& archTraitsTable() {
  static const std::vector<ArchTraits> kTable(std::begin(kArchTraits), std::end(kArchTraits));
  return kTable;
}

const ArchTraits* archTraits(int arch) {
  for (const ArchTraits& t : archTraitsTable()) {
    if (t.arch == arch) return &t;
  }
  return nullptr;
}

bool archSupportsMultimem(int cc_major, int cc_minor) {
  if (const ArchTraits* t = archTraits(archOf(cc_major, cc_minor))) return t->multimem;
  // An unknown member of a known family behaves like the family (12.7 is RTX Blackwell: none).
  for (const ArchTraits& t : archTraitsTable()) {
    if (t.family == cc_major) return t.multimem;
  }
  return cc_major >= 9;  // the PTX ISA requirement of multimem.*: sm_90 or newer
}

std::vector<int> knownArchs(const Tables& t) {
  std::vector<int> archs;
  for (const TableRow& row : t.rows()) archs.push_back(row.arch);
  for (const ArchTraits& traits : archTraitsTable()) archs.push_back(traits.arch);
  // GPU arches ascending; the two special keys (default = -1, host = 0) sort last, default first.
  auto rank = [](int a) { return a == kArchDefault ? 1 : (a == kArchHost ? 2 : 0); };
  std::sort(archs.begin(), archs.end(), [&](int a, int b) { return rank(a) != rank(b) ? rank(a) < rank(b) : a < b; });
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
  return archs;
}

}  // namespace symmar

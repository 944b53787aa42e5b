#include "gpu/peer_probe.h"

#include <cstdint>
#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/kernel_launch.h"

namespace symmar {
namespace gpu {

P2pMode p2pModeFromEnv() {
  const char* v = envRaw("SYMMAR_P2P");
  if (!v || std::strcmp(v, "probe") == 0) return kP2pProbe;
  if (std::strcmp(v, "trust") == 0) return kP2pTrust;
  if (std::strcmp(v, "off") == 0) return kP2pOff;
  SYMMAR_WARN(kSubsysGpu, "SYMMAR_P2P=%s is not probe, trust or off: probing", v);
  return kP2pProbe;
}

P2pMode agreedP2pMode(const std::vector<int32_t>& modes) {
  int32_t agreed = kP2pTrust;
  for (int32_t m : modes) {
    if (m < kP2pTrust || m > kP2pOff) m = kP2pOff;
    agreed = m > agreed ? m : agreed;
  }
  return static_cast<P2pMode>(agreed);
}

const char* p2pModeName(P2pMode m) { return m == kP2pTrust ? "trust" : m == kP2pOff ? "off" : "probe"; }

P2pRow crossGpuOutcomes(P2pRow row, const std::vector<bool>& on_my_gpu) {
  for (size_t p = 0; p < row.size() && p < on_my_gpu.size(); ++p) {
    if (on_my_gpu[p]) row[p] = 0;
  }
  return row;
}

BrokenPair firstBrokenPair(const std::vector<P2pRow>& rows) {
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t p = 0; p < rows.size() && p < static_cast<size_t>(kMaxRanks); ++p) {
      if (p != r && rows[r][p] != 0) return BrokenPair{static_cast<int>(r), static_cast<int>(p), rows[r][p]};
    }
  }
  return BrokenPair{};
}

symmarResult_t agreePeerProbe(Bootstrap& bootstrap, const P2pRow& mine, BrokenPair* broken) {
  std::vector<P2pRow> rows;
  SYMMAR_CHECK(gatherAll(bootstrap, mine, &rows));
  *broken = firstBrokenPair(rows);
  return symmarSuccess;
}

std::string describeBrokenPair(const BrokenPair& b) {
  if (b.rank < 0) return "every pair checked out";
  std::string what;
  if (b.outcome == kP2pTimedOut) {
    what = "rank " + std::to_string(b.peer) + "'s writes never arrived at rank " + std::to_string(b.rank);
  } else if (b.outcome == kP2pTooSlow) {
    what = "rank " + std::to_string(b.rank) + "'s loads from rank " + std::to_string(b.peer) +
           " were right but took more than " + std::to_string(kP2pCheckNs / 1000000) + " ms";
  } else {
    what = "rank " + std::to_string(b.rank) + " found " + std::to_string(b.outcome) +
           " wrong 32-bit words in what it exchanged with rank " + std::to_string(b.peer);
  }
  return "peer access between the GPUs of ranks " + std::to_string(b.rank) + " and " + std::to_string(b.peer) +
         " is broken (" + what + "). Usual causes: an IOMMU in translation mode, PCIe ACS redirecting peer traffic " +
         "through the root complex, or a BIOS setting; NCCL on this machine likely needs NCCL_P2P_DISABLE=1 too";
}

}  // namespace gpu
}  // namespace symmar

// The host-side decisions of the peer-access probe (cuda/probe.cu): which mode SYMMAR_P2P asks for,
// and which pair of ranks, if any, the probe found broken. Pure, so they are unit-tested with
// injected results.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/bootstrap_api.h"
#include "cuda/kernel_args.h"

namespace symmar {
namespace gpu {

/// SYMMAR_P2P: probe (default) checks peer access over PCIe at comm creation, trust skips the
/// check, off never uses peer access (the symmetric kernels are off). Ranks use the most careful
/// mode any of them asks for: off over probe over trust.
enum P2pMode : int { kP2pTrust = 0, kP2pProbe = 1, kP2pOff = 2 };
/// This process's SYMMAR_P2P (unknown text: probe, with a WARN).
P2pMode p2pModeFromEnv();
/// The mode every rank applies, from every rank's published mode: the most careful one. A value
/// that is no mode (a corrupt or hostile peer) counts as off.
P2pMode agreedP2pMode(const std::vector<int32_t>& modes);
const char* p2pModeName(P2pMode m);

/// One rank's per-peer outcomes (result words 2.. of the probe: 0, wrong words, kP2pTimedOut or
/// kP2pTooSlow).
using P2pRow = std::array<long long, kMaxRanks>;

struct BrokenPair {
  int rank = -1;  ///< the rank that checked; -1 when every pair checked out
  int peer = -1;
  long long outcome = 0;
};
/// row with every peer on this rank's GPU (on_my_gpu[p]) counted as checked out: those ranks reach
/// each other in the GPU's own memory, with no link to check. A pair that cannot meet because its
/// kernels do not run at the same time is the co-scheduling probe's finding (it runs next), not a
/// broken link.
P2pRow crossGpuOutcomes(P2pRow row, const std::vector<bool>& on_my_gpu);
/// The first (rank, peer) pair, in rank then peer order, whose check did not come out 0.
BrokenPair firstBrokenPair(const std::vector<P2pRow>& rows);
/// Collective: gathers every rank's row and returns the first broken pair, the same on every rank.
symmarResult_t agreePeerProbe(Bootstrap& bootstrap, const P2pRow& mine, BrokenPair* broken);
/// One line for the log: the pair, what went wrong, the usual causes and what to set for NCCL.
std::string describeBrokenPair(const BrokenPair& b);

}  // namespace gpu
}  // namespace symmar

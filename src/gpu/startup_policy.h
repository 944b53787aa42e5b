// Decisions the CUDA backend takes at comm creation from facts every rank shares: whether kernels
// launch with programmatic dependent launch, how many blocks a kernel may use, whether the comm
// makes an NCCL communicator of its own, and which start-up probes run in which order. No CUDA
// calls here, so every rule is unit-tested without a GPU.
#pragma once
#include <stdint.h>

#include <vector>

#include "gpu/peer_probe.h"
#include "symmar/symmar.h"

namespace symmar {
namespace gpu {

/// Programmatic dependent launch (SYMMAR_PDL, sm_90+) lets a rank's next kernel become resident
/// while its current one still runs.
bool usePdl(bool requested, int cc_major);

/// Grids of one rank that must fit on the GPU at once. With PDL a rank's next grid can become
/// resident (parked in its dependency wait) while its current one runs; with one GPU per rank that
/// only hides launch latency, but where ranks share a GPU the co-residency cap must count both
/// grids: otherwise a fast rank's early next grid could keep a slower rank's current grid from
/// being scheduled, and its peers would spin until the timeout.
int residentGridsPerRank(bool pdl, bool devices_repeat);

/// Blocks one symmetric kernel may launch: every rank on a GPU spins on its peers, so all their
/// grids must be resident at once: multiprocessors x the fewest resident blocks any kernel allows /
/// grids on the GPU (ranks on it x residentGridsPerRank), within [1, max_blocks]. blocks_per_sm holds the occupancy of every kernel that
/// answered; with none (no kernel image for this GPU) one block per multiprocessor is assumed.
int coResidentBlocks(int multiprocessors, const std::vector<int>& blocks_per_sm, int grids_on_device,
                     int max_blocks);

/// The grid limits every rank launches with: the block cap (coResidentBlocks) and the most blocks a
/// fused row is spread over (SYMMAR_FUSED_ROW_PARTS), agreed across ranks in one word each
/// (gridLimitsWord, gathered from every rank, then agreedGridLimits: the smallest of each), so every
/// rank launches the same grids.
struct GridLimits {
  int blocks = 1;
  int row_parts = 1;
};
int32_t gridLimitsWord(const GridLimits& mine);
GridLimits agreedGridLimits(const std::vector<int32_t>& words);

/// Whether the comm creates an NCCL communicator for its fallback. Not as the host stage of a
/// hierarchical comm, which serves the nccl algorithm from the communicator of the whole comm; and
/// not when several ranks share a GPU, which NCCL refuses.
bool wantOwnNccl(bool host_stage, bool devices_repeat);

/// The comm-wide facts the start-up probes depend on, after SYMMAR_P2P=off or a link without peer
/// access has moved the staging to host memory.
struct ProbeFacts {
  P2pMode p2p = kP2pProbe;       ///< SYMMAR_P2P as every rank applies it
  bool have_heap = false;        ///< every rank on this host: a shared heap exists
  bool devices_repeat = false;   ///< some GPU hosts more than one rank
  bool peer_access = false;      ///< the kernels read peers' device memory
  bool host_staged = false;      ///< the kernels stage through pinned host memory
  symmarLink_t link = symmarLinkUnknown;
};

enum class StartupProbe { kPeerAccess, kCoScheduling };

/// The probes to run, in order. The peer-access probe (PCIe under SYMMAR_P2P=probe) comes first: the
/// co-scheduling probe sends its flags across the same links, and a broken link must move the
/// staging to host memory rather than read as ranks that do not run together. The co-scheduling
/// probe runs whenever ranks share a GPU and the kernels stay on, host-staged included, since those
/// kernels spin on each other just the same. A broken link found by the first probe keeps the
/// kernels on (staging in host memory), so the second is still due.
std::vector<StartupProbe> planStartupProbes(const ProbeFacts& f);

}  // namespace gpu
}  // namespace symmar

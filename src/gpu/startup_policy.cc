#include "gpu/startup_policy.h"

#include <algorithm>
#include <cstdint>

#include "cuda/kernel_args.h"

namespace symmar {
namespace gpu {

bool usePdl(bool requested, int cc_major) { return requested && cc_major >= 9; }

int residentGridsPerRank(bool pdl, bool devices_repeat) { return pdl && devices_repeat ? 2 : 1; }

// cap * 16 + parts: the cap is at most sched::kMaxBlocks, the parts at most kMaxRowParts (< 16).
static_assert(kMaxRowParts < 16, "the parts fit a word's low 4 bits");

int32_t gridLimitsWord(const GridLimits& mine) {
  const int parts = std::max(1, std::min(mine.row_parts, kMaxRowParts));
  return std::max(1, std::min(mine.blocks, sched::kMaxBlocks)) * 16 + parts;
}

GridLimits agreedGridLimits(const std::vector<int32_t>& words) {
  GridLimits g{sched::kMaxBlocks, kMaxRowParts};
  for (const int32_t w : words) {
    // A peer's word, decoded into range: a broken peer cannot ask for no blocks or a negative spread.
    g.blocks = std::min(g.blocks, std::max(1, static_cast<int>(w / 16)));
    g.row_parts = std::min(g.row_parts, std::max(1, static_cast<int>(w % 16)));
  }
  return g;
}

int coResidentBlocks(int multiprocessors, const std::vector<int>& blocks_per_sm, int grids_on_device,
                     int max_blocks) {
  int per_sm = 1;
  if (!blocks_per_sm.empty()) per_sm = std::max(1, *std::min_element(blocks_per_sm.begin(), blocks_per_sm.end()));
  // In 64 bits: a large occupancy answer times the multiprocessors must not overflow.
  const int64_t resident = int64_t{std::max(multiprocessors, 1)} * per_sm / std::max(grids_on_device, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(resident, std::max(max_blocks, 1))));
}

bool wantOwnNccl(bool host_stage, bool devices_repeat) { return !host_stage && !devices_repeat; }

std::vector<StartupProbe> planStartupProbes(const ProbeFacts& f) {
  std::vector<StartupProbe> plan;
  if (!f.have_heap) return plan;  // no shared heap: no symmetric kernels, nothing to probe
  if (f.p2p == kP2pProbe && f.peer_access && f.link == symmarLinkPcie) plan.push_back(StartupProbe::kPeerAccess);
  if (f.devices_repeat && (f.peer_access || f.host_staged)) plan.push_back(StartupProbe::kCoScheduling);
  return plan;
}

}  // namespace gpu
}  // namespace symmar

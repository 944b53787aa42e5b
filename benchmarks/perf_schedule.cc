#include "perf_schedule.h"

#include <algorithm>

namespace perf {

std::vector<ScheduledCall> interleavedSchedule(size_t variants, int warmup, int iters, int block) {
  std::vector<ScheduledCall> calls;
  if (variants == 0 || iters < 1 || warmup < 0 || block < 1) return calls;
  const int per_variant = warmup + iters;
  const bool switches = variants > 1 && block > 1;
  for (int done = 0; done < per_variant; done += block) {
    const int run = std::min(block, per_variant - done);
    for (size_t v = 0; v < variants; ++v) {
      if (switches) calls.push_back({v, false});
      for (int i = done; i < done + run; ++i) calls.push_back({v, i >= warmup});
    }
  }
  return calls;
}

}  // namespace perf

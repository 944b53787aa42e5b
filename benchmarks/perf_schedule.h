// The order in which a benchmark times several variants (algorithms, dtypes, fused forms) of one
// call: interleaved, so that all of them share the same moments of a machine whose speed drifts,
// and in short runs of one variant, so that each is timed in the state its own calls leave.
#pragma once
#include <cstddef>
#include <vector>

namespace perf {

/// One call of a schedule: which variant, and whether its time counts.
struct ScheduledCall {
  size_t variant;
  bool timed;
};

/// Every variant gets warmup untimed calls and then iters timed ones, in runs of at most block
/// consecutive calls, the variants taking turns run by run. Where there are several variants, a
/// run starts with one more untimed call (the switch): each timed call then follows a call of the
/// same variant, as in a server that calls one algorithm at one size again and again. Timing
/// every call right after another variant's measures each in the state the other left (its
/// staging and caches): on a 2-core VM that made one-shot look faster than two-shot at 1 MiB,
/// where each run alone showed two-shot 3x faster. block 1 alternates call by call, no switch calls.
std::vector<ScheduledCall> interleavedSchedule(size_t variants, int warmup, int iters, int block);

}  // namespace perf

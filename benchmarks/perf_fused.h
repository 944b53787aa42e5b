// One rank's side of symmar_tune's fused sweep (-C addrmsnorm): the fused allreduce + residual
// add + RMSNorm in each form against the unfused path, at decode and prefill token counts, on the
// comm's own device (host or GPU).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "perf_group.h"
#include "perf_runner.h"
#include "tune_table.h"

namespace perf {

/// What the fused sweep measures: rows of hidden elements of opt.dtype, tokens rows a call.
struct FusedSweep {
  size_t hidden = 7168;
  std::vector<size_t> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
};

/// Times every fused form the comm serves (one-shot, two-shot, and lamport on GPU comms where a
/// call fits it) and the unfused path (the comm's auto call, on a comm made with
/// tune::unfusedTableJson's rows)
/// at each token count, interleaved in short runs (perf_schedule.h), and checks each form's last
/// outputs against a float64 reference. Collective over group; the same measurements on every
/// rank (each the slowest rank's median). False with *error on a failed call or a wrong output.
bool runFusedSweep(symmarComm_t comm, Group& group, const Options& opt, const FusedSweep& sweep, int gpu_device,
                   std::vector<tune::FusedMeasurement>* out, std::string* error);

}  // namespace perf

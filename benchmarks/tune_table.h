// Turns measured times per (algorithm, size) into one table row: the winner at each size, with a
// margin against noise, merged into at most kMaxTableEntries ordered (algorithm, max bytes) entries.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "symmar/symmar.h"

namespace tune {

struct Measurement {
  symmarAlgo_t algo;
  size_t bytes;
  double time_us;
};

struct Entry {
  symmarAlgo_t algo;
  uint64_t max_bytes;  // UINT64_MAX: unbounded
};

/// The current winner keeps a size unless another algorithm is faster by more than margin
/// (0.05 = 5%). Sizes are those measured; thresholds are the last size each entry won. More than
/// four runs: the run that costs least (summed relative slowdown) goes to a neighbour. A symmetric
/// winner at the largest size is extended to any size; a fallback winner (nccl/mpi) at the end is
/// left to the planner's fallback rule and not listed.
std::vector<Entry> tuneRow(const std::vector<Measurement>& measurements, double margin);

/// One size of the fused allreduce + residual add + RMSNorm: each form's time (0: not measured)
/// and the unfused path's (the allreduce, then the add and norm).
struct FusedMeasurement {
  size_t bytes;  ///< tokens x hidden elements
  double oneshot_us, twoshot_us, unfused_us;
  double lamport_us = 0;  ///< the lamport form (GPU comms, calls it fits); 0: not measured
};

/// The fused call's row (collective "addrmsnorm"): from the smallest size up, the faster fused
/// form (with tuneRow's margin against noise) while the better form is no slower than the unfused
/// path by more than margin; the row ends at the last such size, past which the planner runs the
/// unfused path. Where the fused call loses from the smallest size, a single entry of 1 byte (no
/// call is that small): an empty fused row would defer to the allreduce's row instead.
std::vector<Entry> tuneFusedRow(std::vector<FusedMeasurement> measurements, double margin);

/// A table file whose fused rows (collective "addrmsnorm") end at 1 byte for every key a comm can
/// have: a comm made with it runs symmarAllReduceAddRmsNorm on the unfused path (the allreduce its
/// tables plan, then the add and norm) for every call, while the Algo form still runs each fused
/// form. symmar_tune -C addrmsnorm times the unfused path so, beside the fused forms.
std::string unfusedTableJson();

/// A table file (see docs/tuning.md) holding one row; hosts > 1 keys it for comms spanning that
/// many hosts (world is then the ranks per host); collective names the row's collective where it
/// is not the allreduce ("reducescatter", "allgather": sizes are then the whole buffer).
std::string tableFileJson(const std::string& arch, const std::string& link, int world, const std::vector<Entry>& entries,
                          const std::string& source, int hosts = 1, const std::string& collective = "allreduce");

}  // namespace tune

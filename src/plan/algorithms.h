// One home for what each algorithm can do: the rules the planner and both executors ask, in the
// spirit of a can_implement check. Adding an algorithm = its kernel or executor, one line here,
// and table entries.
#pragma once
#include <cstddef>
#include <cstdint>

#include "symmar/symmar.h"

namespace symmar {

struct AlgorithmTraits {
  symmarAlgo_t algo;
  /// True when the algorithm can serve (dtype, op) on this topology; fallbacks holds the bits of
  /// the fallbacks the comm has (nccl, mpi).
  bool (*can_implement)(const symmarTopology_t& topo, symmarDataType_t dtype, symmarRedOp_t op, uint32_t fallbacks);
  /// Peers may read a send buffer in the symmetric heap in place (no staging copy). Multimem may
  /// not: the multicast view needs the same offset on every rank, which only staging gives.
  bool peers_read_inputs_in_place;
  /// Largest message (bytes per rank) it serves; 0: any.
  uint64_t max_bytes;
};

/// Traits of a concrete algorithm (not symmarAlgoAuto: it implements nothing).
const AlgorithmTraits& algorithmTraits(symmarAlgo_t algo);
/// Every concrete algorithm's traits, in symmarAlgo_t order: *count entries.
const AlgorithmTraits* algorithmTraitsTable(size_t* count);

}  // namespace symmar

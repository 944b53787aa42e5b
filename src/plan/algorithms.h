// One home for what each algorithm can do: one record per algorithm, whose can_implement answers
// with the reason it cannot serve a request (in the spirit of a can_implement check). The planner,
// the forced paths (symmarAllReduceAlgo, SYMMAR_ALGO) and the error texts all take this answer.
// Names live in core/names.cc (the layers below the planner print them too). Adding an algorithm:
// docs/architecture.md, "Where to add things".
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/call.h"
#include "symmar/symmar.h"

namespace symmar {

/// Why an algorithm cannot serve a request; kNone when it can.
enum class Refusal {
  kNone,
  kNotAnAlgorithm,  ///< symmarAlgoAuto or a value outside the enum
  kDtype,           ///< the kernels reduce float32, float16 and bfloat16 only
  kOp,              ///< the operation has no form here (multimem: no float32 max/min)
  kLink,            ///< the comm's link gives it no way to reach its peers' memory
  kNoSwitch,        ///< multimem needs GPUs on an NVSwitch
  kNotGpu,          ///< NCCL serves GPU comms only
  kNotHost,         ///< the MPI fallback serves CPU comms only
  kNoMulticast,     ///< multimem needs multicast objects over an NVSwitch
  kArch,            ///< the GPU architecture lacks the instructions
  kTooLarge,        ///< the message is larger than the algorithm's buffers hold
  kNoFallback,      ///< the comm has no such fallback (nccl on GPU comms, mpi on host comms)
  kDisabled,        ///< SYMMAR_DISABLE names it
  kCollective,      ///< it has no form of this collective (yet) on this comm
};
/// The reason in words, to follow "cannot serve this call: ".
const char* refusalText(Refusal refusal);

/// What an algorithm is asked to serve. bytes: per rank (0 leaves the size out of the answer).
struct Request {
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t bytes;
  Collective coll = Collective::kAllReduce;
  int hosts = 1;  ///< hosts the comm spans (the host's lamport reduce-scatter and all-gather serve one)
};

struct AlgorithmTraits {
  symmarAlgo_t algo;
  /// Why it cannot serve (dtype, op) on this topology, size aside; fallbacks holds the bits of the
  /// fallbacks the comm has (nccl, mpi).
  Refusal (*can_implement)(const symmarTopology_t& topo, const Request& request, uint32_t fallbacks);
  /// Peers may read a send buffer in the symmetric heap in place (no staging copy). Multimem may
  /// not: the multicast view needs the same offset on every rank, which only staging gives.
  bool peers_read_inputs_in_place;
  /// Largest message (bytes per rank) it serves; 0: any.
  uint64_t max_bytes;
};

/// Traits of a concrete algorithm (symmarAlgoAuto and unknown values get a record that refuses
/// everything with kNotAnAlgorithm).
const AlgorithmTraits& algorithmTraits(symmarAlgo_t algo);
/// Every concrete algorithm's traits, in symmarAlgo_t order: *count entries.
const AlgorithmTraits* algorithmTraitsTable(size_t* count);
/// The one answer to "can algo serve this request on this comm": can_implement, then the size
/// limit (SYMMAR_DISABLE is the planner's, see planner.h).
Refusal canImplement(symmarAlgo_t algo, const symmarTopology_t& topo, const Request& request, uint32_t fallbacks);

}  // namespace symmar

#include "plan/algorithms.h"

#include <cstdint>

#include "core/names.h"
#include "core/schedule.h"
#include "plan/arch.h"

namespace symmar {
namespace {

/// The GPU kernels reduce f32, f16 and bf16 (i32 and f64 go to the fallback).
bool kernelDtype(symmarDataType_t d) { return d == symmarFloat32 || d == symmarFloat16 || d == symmarBfloat16; }
bool gpuPeerLink(const symmarTopology_t& t) {
  return t.cc_major > 0 &&
         (t.link == symmarLinkNvSwitch || t.link == symmarLinkNvLink || t.link == symmarLinkPcie ||
          t.link == symmarLinkPcieNoP2P);
}

/// One-shot and two-shot: every host comm that shares memory, every GPU comm with peer access.
bool symmetric(const symmarTopology_t& t, symmarDataType_t d, symmarRedOp_t, uint32_t) {
  return t.link == symmarLinkHostMemory || (gpuPeerLink(t) && kernelDtype(d));
}

/// NVLink SHARP: an NVSwitch with multicast, an architecture with multimem, and a reduction the
/// switch has (f32 only adds: there is no f32 max/min multimem form).
bool multimem(const symmarTopology_t& t, symmarDataType_t d, symmarRedOp_t op, uint32_t) {
  return t.cc_major > 0 && t.link == symmarLinkNvSwitch && t.multicast && t.world_size > 1 &&
         archSupportsMultimem(t.cc_major, t.cc_minor) && kernelDtype(d) && !(d == symmarFloat32 && op != symmarSum);
}

/// Lamport: GPUs with peer access (it pushes into peers' memory) and the host backend's twin;
/// f32/f16/bf16 only (the empty pattern is a valid i32 and half an f64).
bool lamport(const symmarTopology_t& t, symmarDataType_t d, symmarRedOp_t, uint32_t) {
  const bool peer = t.cc_major > 0 && (t.link == symmarLinkNvSwitch || t.link == symmarLinkNvLink || t.link == symmarLinkPcie);
  return (t.link == symmarLinkHostMemory || peer) && kernelDtype(d);
}

bool nccl(const symmarTopology_t& t, symmarDataType_t, symmarRedOp_t, uint32_t fallbacks) {
  return t.cc_major > 0 && t.link != symmarLinkHostMemory && (fallbacks & algoBit(symmarAlgoNccl));
}

/// The host fallback serves every host-backend comm that has it, those spanning hosts (link
/// unknown: no shared memory between them) above all.
bool mpi(const symmarTopology_t& t, symmarDataType_t, symmarRedOp_t, uint32_t fallbacks) {
  return t.cc_major == 0 && (t.link == symmarLinkHostMemory || t.link == symmarLinkUnknown) &&
         (fallbacks & algoBit(symmarAlgoMpi));
}

const AlgorithmTraits kTraits[] = {
    {symmarAlgoOneShot, symmetric, true, 0},
    {symmarAlgoTwoShot, symmetric, true, 0},
    {symmarAlgoMultimem, multimem, false, 0},
    {symmarAlgoNccl, nccl, false, 0},
    {symmarAlgoMpi, mpi, false, 0},
    {symmarAlgoLamport, lamport, false, sched::kLamportMaxBytes},
};

bool never(const symmarTopology_t&, symmarDataType_t, symmarRedOp_t, uint32_t) { return false; }
const AlgorithmTraits kNone = {symmarAlgoAuto, never, false, 0};

}  // namespace

const AlgorithmTraits* algorithmTraitsTable(size_t* count) {
  *count = sizeof(kTraits) / sizeof(kTraits[0]);
  return kTraits;
}

const AlgorithmTraits& algorithmTraits(symmarAlgo_t algo) {
  for (const AlgorithmTraits& t : kTraits) {
    if (t.algo == algo) return t;
  }
  return kNone;
}

}  // namespace symmar

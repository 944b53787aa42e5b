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
Refusal symmetric(const symmarTopology_t& t, const Request& r, uint32_t) {
  if (t.link == symmarLinkHostMemory) return Refusal::kNone;  // across hosts too, once an engine is set
  if (!gpuPeerLink(t)) return Refusal::kLink;
  if (r.coll == Collective::kAllGather) return Refusal::kNone;  // a copy: any element size
  return kernelDtype(r.dtype) ? Refusal::kNone : Refusal::kDtype;
}

/// Two-shot is itself a reduce-scatter and an all-gather: those collectives are one-shot's.
Refusal twoShot(const symmarTopology_t& t, const Request& r, uint32_t fallbacks) {
  return r.coll != Collective::kAllReduce ? Refusal::kCollective : symmetric(t, r, fallbacks);
}

/// NVLink SHARP: an NVSwitch with multicast, an architecture with multimem, and a reduction the
/// switch has (f32 only adds: there is no f32 max/min multimem form). An all-gather is a copy
/// (multimem.st of any bits): every dtype.
Refusal multimem(const symmarTopology_t& t, const Request& r, uint32_t) {
  if (t.cc_major == 0 || t.link != symmarLinkNvSwitch) return Refusal::kNoSwitch;
  if (!archSupportsMultimem(t.cc_major, t.cc_minor)) return Refusal::kArch;
  if (!t.multicast || t.world_size < 2) return Refusal::kNoMulticast;
  if (r.coll == Collective::kAllGather) return Refusal::kNone;
  if (!kernelDtype(r.dtype)) return Refusal::kDtype;
  return r.dtype == symmarFloat32 && r.op != symmarSum ? Refusal::kOp : Refusal::kNone;
}

/// Lamport: GPUs with peer access (it pushes into peers' memory; staging in host memory is no
/// peer access) and the host backend's twin; the allreduce in f32/f16/bf16 only (the empty pattern
/// is a valid i32 and half an f64). The host also has reduce-scatter and all-gather forms, within
/// one host, in every dtype (their data travels raw: a trailer marks its arrival).
Refusal lamport(const symmarTopology_t& t, const Request& r, uint32_t) {
  const bool peer =
      t.cc_major > 0 && (t.link == symmarLinkNvSwitch || t.link == symmarLinkNvLink || t.link == symmarLinkPcie);
  if (t.link != symmarLinkHostMemory && !peer) return Refusal::kLink;
  if (r.coll != Collective::kAllReduce) {
    return t.link == symmarLinkHostMemory && r.hosts == 1 ? Refusal::kNone : Refusal::kCollective;
  }
  return kernelDtype(r.dtype) ? Refusal::kNone : Refusal::kDtype;
}

Refusal nccl(const symmarTopology_t& t, const Request&, uint32_t fallbacks) {
  if (t.cc_major == 0 || t.link == symmarLinkHostMemory) return Refusal::kNotGpu;
  return fallbacks & algoBit(symmarAlgoNccl) ? Refusal::kNone : Refusal::kNoFallback;
}

/// The host fallback serves every host-backend comm that has it, those spanning hosts (link
/// unknown: no shared memory between them) above all.
Refusal mpi(const symmarTopology_t& t, const Request&, uint32_t fallbacks) {
  if (t.cc_major != 0 || (t.link != symmarLinkHostMemory && t.link != symmarLinkUnknown)) return Refusal::kNotHost;
  return fallbacks & algoBit(symmarAlgoMpi) ? Refusal::kNone : Refusal::kNoFallback;
}

const AlgorithmTraits kTraits[] = {
    {symmarAlgoOneShot, symmetric, true, 0},
    {symmarAlgoTwoShot, twoShot, true, 0},
    {symmarAlgoMultimem, multimem, false, 0},
    {symmarAlgoNccl, nccl, false, 0},
    {symmarAlgoMpi, mpi, false, 0},
    {symmarAlgoLamport, lamport, false, sched::kLamportMaxBytes},
};

Refusal never(const symmarTopology_t&, const Request&, uint32_t) { return Refusal::kNotAnAlgorithm; }
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

Refusal canImplement(symmarAlgo_t algo, const symmarTopology_t& topo, const Request& request, uint32_t fallbacks) {
  const AlgorithmTraits& traits = algorithmTraits(algo);
  const Refusal why = traits.can_implement(topo, request, fallbacks);
  if (why != Refusal::kNone) return why;
  return traits.max_bytes != 0 && request.bytes > traits.max_bytes ? Refusal::kTooLarge : Refusal::kNone;
}

const char* refusalText(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNone: return "none";
    case Refusal::kNotAnAlgorithm: return "not an algorithm";
    case Refusal::kDtype: return "its kernels reduce float32, float16 and bfloat16 only";
    case Refusal::kOp: return "the NVSwitch has no float32 max or min";
    case Refusal::kLink: return "this comm's link gives it no access to its peers' memory";
    case Refusal::kNoSwitch: return "multimem needs GPUs on an NVSwitch";
    case Refusal::kNotGpu: return "NCCL serves GPU comms only, and this comm's ranks run on CPUs";
    case Refusal::kNotHost: return "the MPI fallback serves CPU comms only, and this comm's ranks run on GPUs";
    case Refusal::kNoMulticast: return "this comm has no multicast object (needs an NVSwitch with multicast)";
    case Refusal::kArch: return "this GPU architecture has no multimem instructions";
    case Refusal::kTooLarge: return "the message is larger than its buffers hold";
    case Refusal::kNoFallback: return "this comm has no such fallback";
    case Refusal::kDisabled: return "SYMMAR_DISABLE names it";
    case Refusal::kCollective: return "it has no form of this collective on this comm";
  }
  return "unknown";
}

}  // namespace symmar

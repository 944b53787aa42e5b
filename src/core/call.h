// One collective call as it crosses the backend boundary, and the one recipe for the signature
// ranks compare to know they are making the same call (host barriers, lamport headers on the host
// and the GPU, inter-host records).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/hash.h"
#include "core/host_device.h"
#include "symmar/symmar.h"

namespace symmar {

/// One allreduce, arguments checked and algorithm chosen (api_coll.cc builds it once). count 0 is a
/// call like any other: it moves no data but takes part in call matching.
struct AllReduceCall {
  const void* send;
  void* recv;
  size_t count;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  symmarAlgo_t algo;
  void* stream;
  /// The signature peers compare, where this allreduce is a step of another call (the fused call
  /// without a fused form: its signature names hidden and the FP8 output too); 0: its own.
  uint64_t matched_as = 0;
  size_t elem() const { return symmarTypeSize(dtype); }
  size_t bytes() const { return count * elem(); }
};

/// The collectives a comm runs. kAddRmsNorm is the fused allreduce + residual add + RMSNorm
/// (symmarAllReduceAddRmsNorm): it has table rows of its own, which choose its form.
enum class Collective : int { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kAddRmsNorm = 3 };
constexpr int kNumCollectives = 4;

/// One reduce-scatter or all-gather, arguments checked and algorithm chosen
/// (api_scatter_gather.cc). count: elements per rank (a reduce-scatter's recvcount, an
/// all-gather's sendcount); send and recv hold count and nranks * count elements or the reverse.
/// In place (NCCL's rule): recv == send + rank * count (reduce-scatter) or send == recv + rank *
/// count (all-gather). op is symmarSum for an all-gather. count 0 takes part in call matching.
struct ScatterGatherCall {
  Collective coll;
  const void* send;
  void* recv;
  size_t count;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  symmarAlgo_t algo;
  void* stream;
  size_t elem() const { return symmarTypeSize(dtype); }
};

/// The fused allreduce + residual add + RMSNorm (+ FP8) call, arguments checked
/// (symmarAllReduceAddRmsNorm).
struct AddRmsNormCall {
  const void* input;
  const void* residual_in;
  void* residual_out;
  void* norm_out;
  const void* gamma;
  void* fp8_out;
  float fp8_scale;
  float eps;
  size_t tokens;
  size_t hidden;
  symmarDataType_t dtype;
  /// The form is the planner's choice, not the caller's: where a row fits the one-shot form's
  /// staging layout but not the two-shot's, the backend takes the one-shot form instead of failing.
  bool planned = false;
  symmarAlgo_t algo = symmarAlgoAuto;  ///< the form: symmarAlgoOneShot or symmarAlgoTwoShot
  void* stream = nullptr;
};

/// Which call this is, as ranks compare it: count, dtype, op and algorithm. Never 0 (0 means "no
/// check" where a signature word is optional).
SYMMAR_HD uint64_t callSignature(uint64_t count, int dtype, int op, int algo) {
  return fnv1aMix(
             fnv1aMix(fnv1aMix(fnv1aMix(kFnvOffset, count), static_cast<uint64_t>(dtype)), static_cast<uint64_t>(op)),
             static_cast<uint64_t>(algo)) |
         1;
}
inline uint64_t callSignature(const AllReduceCall& c) {
  return c.matched_as != 0 ? c.matched_as : callSignature(c.count, c.dtype, c.op, c.algo);
}
/// The fused call's signature in the form that runs (which may differ from c.algo where the
/// planned form's rows do not fit: fitAddRmsNormForm). Its algorithm code lies outside the enum,
/// so it never equals a plain allreduce's; hidden and the FP8 output are in it.
inline uint64_t callSignature(const AddRmsNormCall& c, symmarAlgo_t form) {
  const uint64_t base = callSignature(c.tokens * c.hidden, c.dtype, symmarSum, 100 + form);
  return fnv1aMix(fnv1aMix(base, c.hidden), c.fp8_out ? 1 : 0) | 1;
}
/// A reduce-scatter's or all-gather's signature: its algorithm code lies outside the enum and past
/// the fused call's, so it never equals an allreduce's or another collective's.
inline uint64_t callSignature(const ScatterGatherCall& c) {
  return callSignature(c.count, c.dtype, c.op, 200 + 16 * static_cast<int>(c.coll) + c.algo);
}
/// A signature with the call's number in the comm's call sequence: what a barrier or a lamport
/// header carries, so that two ranks whose calls went out of step never pair. Never 0.
SYMMAR_HD uint64_t numberedSignature(uint64_t signature, uint32_t call) { return fnv1aMix(signature, call) | 1; }

}  // namespace symmar

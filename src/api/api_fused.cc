// symmarAllReduceAddRmsNorm: argument checks (shapes, dtypes, aliasing), the form from the planner,
// the backend's fused call, and for comms without one the unfused path: the allreduce, then the add
// and the norm on each rank (the backend's addRmsNormRows).
#include <cmath>
#include <cstdint>

#include "api/collective.h"
#include "api/guard.h"
#include "core/names.h"
#include "plan/planner.h"

using namespace symmar;

namespace {

struct Span {
  uintptr_t lo, hi;
};
Span span(const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return Span{a, a + bytes};
}
bool overlap(Span a, Span b) { return a.lo < b.hi && b.lo < a.hi; }
bool same(Span a, Span b) { return a.lo == b.lo && a.hi == b.hi; }

symmarResult_t checkArgs(const symmarAddRmsNormArgs_t* a, const char* fn) {
  if (!a) return fail(symmarInvalidArgument, "%s: args is NULL", fn);
  const int dt = rawEnum(a->dtype);
  if (dt != symmarFloat32 && dt != symmarFloat16 && dt != symmarBfloat16) {
    return fail(symmarInvalidArgument, "%s: dtype %s: the fused norm serves float32, float16 and bfloat16", fn,
                validDtype(dt) ? dtypeName(a->dtype) : "(invalid)");
  }
  // An empty call (no rows, or rows of no elements) moves nothing, like an allreduce of count 0:
  // its buffers may be NULL, and no shape arithmetic (sizes, rows per chunk) runs on it.
  if (a->tokens == 0 || a->hidden == 0) return symmarSuccess;
  const size_t elem = symmarTypeSize(a->dtype);
  if (a->tokens > SIZE_MAX / a->hidden / elem) {
    return fail(symmarInvalidArgument, "%s: %zu x %zu elements overflow the byte size", fn, a->tokens, a->hidden);
  }
  if (!a->input || !a->residual_out || !a->norm_out || !a->gamma) {
    return fail(symmarInvalidArgument, "%s: input, residual_out, norm_out and gamma must not be NULL", fn);
  }
  if (!(a->eps >= 0.0f) || !std::isfinite(a->eps)) return fail(symmarInvalidArgument, "%s: eps %g", fn, a->eps);
  if (a->fp8_out && (!(a->fp8_scale > 0.0f) || !std::isfinite(a->fp8_scale))) {
    return fail(symmarInvalidArgument, "%s: fp8_scale %g must be positive and finite with fp8_out", fn, a->fp8_scale);
  }
  for (const void* p : {a->input, a->residual_in, static_cast<const void*>(a->residual_out),
                        static_cast<const void*>(a->norm_out), a->gamma}) {
    if (reinterpret_cast<uintptr_t>(p) % elem) {
      return fail(symmarInvalidArgument, "%s: buffers must be aligned to the %zu-byte element size", fn, elem);
    }
  }
  const size_t bytes = a->tokens * a->hidden * elem;
  const Span in = span(a->input, bytes), res_out = span(a->residual_out, bytes), norm = span(a->norm_out, bytes);
  const Span res_in = a->residual_in ? span(a->residual_in, bytes) : Span{0, 0};
  const Span gamma = span(a->gamma, a->hidden * elem);
  // Outputs may be an input exactly (in place, row by row), never a part of one or each other.
  for (Span out : {res_out, norm}) {
    for (Span src : {in, res_in}) {
      if (overlap(out, src) && !same(out, src)) {
        return fail(symmarInvalidArgument, "%s: an output overlaps an input without being equal to it", fn);
      }
    }
    if (overlap(out, gamma)) return fail(symmarInvalidArgument, "%s: an output overlaps gamma", fn);
  }
  if (overlap(res_out, norm)) return fail(symmarInvalidArgument, "%s: residual_out and norm_out overlap", fn);
  if (a->fp8_out) {
    const Span q = span(a->fp8_out, a->tokens * a->hidden);
    for (Span other : {in, res_in, res_out, norm, gamma}) {
      if (overlap(q, other)) return fail(symmarInvalidArgument, "%s: fp8_out overlaps another buffer", fn);
    }
  }
  return symmarSuccess;
}

AddRmsNormCall toCall(const symmarAddRmsNormArgs_t& a) {
  return AddRmsNormCall{a.input, a.residual_in, a.residual_out, a.norm_out, a.gamma, a.fp8_out, a.fp8_scale,
                        a.eps,   a.tokens,      a.hidden,       a.dtype};
}

/// No fused form serves this call (ranks on several hosts, where the norm needs every host's sum, or
/// a table row past its last fused threshold): the allreduce through whatever serves it, then the
/// add and norm on each rank (the backend's addRmsNormRows), both on the call's stream. The sums go
/// to an output that the add and norm overwrite only where they have read it: residual_out, or
/// norm_out where residual_out is residual_in (which the sums must not overwrite before it is read;
/// the arguments' rules keep norm_out apart from both then). The sum is rounded to dtype by the
/// allreduce, before residual_in is added.
symmarResult_t unfused(symmarComm* comm, AddRmsNormCall c, void* stream) {
  const size_t n = c.tokens * c.hidden;
  // An empty call: GPU comms match calls by order only and launch nothing for it, on every rank
  // alike; on the host the allreduce of count 0 below still takes part in call matching.
  if (n == 0 && comm->gpu()) return symmarSuccess;
  // Refused before the allreduce moves any data: every rank answers alike (hasAddRmsNormRows).
  if (!comm->backend->hasAddRmsNormRows()) {
    return fail(symmarUnsupported, "symmarAllReduceAddRmsNorm: this comm has no add + norm kernel to follow the "
                "allreduce with (%s)", comm->gpu() ? "this build has no kernel image for its GPU: add its "
                "architecture to CMAKE_CUDA_ARCHITECTURES" : "its backend has none");
  }
  void* sums = c.residual_in != nullptr && c.residual_out == c.residual_in ? c.norm_out : c.residual_out;
  // Peers compare the fused call's signature, not a plain allreduce's of the same elements: hidden
  // and the FP8 output are in it, so no other shape of the fused call, and no allreduce, pairs
  // with this one.
  AllReduceCall sum{c.input, sums, n, c.dtype, symmarSum, symmarAlgoAuto, stream};
  sum.matched_as = callSignature(c, symmarAlgoAuto);
  SYMMAR_CHECK(runAllReduce(comm, sum, "symmarAllReduceAddRmsNorm"));
  if (n == 0) return symmarSuccess;
  c.stream = stream;
  const symmarResult_t res = comm->backend->addRmsNormRows(c, sums);
  noteFailure(comm, res);
  if (res == symmarSuccess) comm->unfused_calls.fetch_add(1, std::memory_order_relaxed);
  return res;
}

symmarResult_t addRmsNorm(const symmarAddRmsNormArgs_t* args, symmarAlgo_t algo, symmarComm* comm, void* stream,
                          const char* fn) {
  SYMMAR_CHECK(checkArgs(args, fn));
  AddRmsNormCall c = toCall(*args);
  const bool across_hosts = comm->placement.hosts > 1;
  if (algo == symmarAlgoAuto) {
    algo = across_hosts ? symmarAlgoAuto
                        : planAddRmsNorm(comm->row(), comm->row(Collective::kAddRmsNorm), comm->topo, comm->fallbacks(),
                                         c.tokens, c.hidden, c.dtype, comm->fused_rows_cap);
    if (algo == symmarAlgoAuto) return unfused(comm, c, stream);
    c.planned = true;
  } else if (algo != symmarAlgoOneShot && algo != symmarAlgoTwoShot && algo != symmarAlgoLamport) {
    return fail(symmarInvalidArgument, "%s: the fused forms are oneshot, twoshot and lamport, not %s", fn,
                symmarAlgoName(algo));
  } else if (algo == symmarAlgoLamport && !comm->gpu()) {
    return fail(symmarUnsupported, "%s: the fused lamport form runs on GPU comms only (this comm's ranks are "
                "processes on the host): use oneshot or twoshot, or let the call choose", fn);
  } else if (across_hosts) {
    return fail(symmarUnsupported, "%s: no fused %s form across hosts (symmarAllReduceAddRmsNorm runs the allreduce, "
                "then the norm)", fn, symmarAlgoName(algo));
  } else if (const Refusal why = refusalOf(algo, comm->topo, {c.dtype, symmarSum, 0}, comm->fallbacks());
             why != Refusal::kNone) {
    return fail(symmarUnsupported, "%s: the fused %s form cannot run on this comm: %s (link %s)", fn,
                symmarAlgoName(algo), refusalText(why), linkName(comm->topo.link));
  }
  c.algo = algo;
  c.stream = stream;
  const symmarResult_t res = comm->backend->allReduceAddRmsNorm(c);
  noteFailure(comm, res);
  return res;
}

}  // namespace

extern "C" {

symmarResult_t symmarAllReduceAddRmsNorm(const symmarAddRmsNormArgs_t* args, symmarComm_t comm, void* stream) {
  return guardedCollective(comm, [&] {
    return addRmsNorm(args, symmarAlgoAuto, comm, stream, "symmarAllReduceAddRmsNorm");
  });
}

symmarResult_t symmarAllReduceAddRmsNormAlgo(const symmarAddRmsNormArgs_t* args, symmarAlgo_t algo, symmarComm_t comm,
                                             void* stream) {
  return guardedCollective(comm, [&] {
    if (!validAlgo(rawEnum(algo))) {
      return fail(symmarInvalidArgument, "symmarAllReduceAddRmsNormAlgo: invalid algorithm %d", rawEnum(algo));
    }
    return addRmsNorm(args, algo, comm, stream, "symmarAllReduceAddRmsNormAlgo");
  });
}

}  // extern "C"

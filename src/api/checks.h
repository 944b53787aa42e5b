// Argument checks shared by the entry points that take a request (symmarAllReduce*, symmarPlan) and
// buffers: one text per mistake, whichever entry point met it.
#pragma once
#include <cstddef>

#include "core/call.h"
#include "symmar/symmar.h"

namespace symmar {

/// dtype and op valid, count's byte size representable. Takes the raw ints of the caller's enums
/// (rawEnum): loading an out-of-range value as the C++ enum is undefined. fn names the entry point.
symmarResult_t checkRequest(size_t count, int dtype, int op, const char* fn);
/// Both buffers present, aligned to the element size, and equal or disjoint.
symmarResult_t checkBuffers(const void* send, void* recv, size_t count, symmarDataType_t dtype, const char* fn);
/// A reduce-scatter's or all-gather's buffers (count elements per rank, nranks ranks): present,
/// aligned, nranks * count representable in bytes, and disjoint unless in place by NCCL's rule
/// (the per-rank buffer at this rank's block of the whole one).
symmarResult_t checkScatterGatherBuffers(Collective coll, const void* send, void* recv, size_t count,
                                         symmarDataType_t dtype, int rank, int nranks, const char* fn);

}  // namespace symmar

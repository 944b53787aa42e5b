// symmarTorchParallelFor: a symmarParallelForFn on torch's intra-op threads, for
// symmarCommSetHostThreads (Comm.set_host_threads(n, pool="torch")). A host allreduce's large steps
// then split over the threads the engine's own CPU allreduce uses: the OpenMP threads an engine such
// as vLLM binds to its worker's cores, one each.
//
// Where torch's parallel backend is OpenMP, at::parallel_for is inline code whose parallel region
// exists only in a file compiled with OpenMP (without it the parts run one after another on the
// calling thread). This file is compiled so (SymmarTorch.cmake) and linked against torch's own
// OpenMP runtime, never a second one: a second runtime would start threads of its own, which
// inherit the calling thread's affinity (one core in such an engine) instead of torch's bound ones.
#include <ATen/Parallel.h>

#include <cstdint>

#include "symmar/symmar.h"

extern "C" {

/// Calls part(arg, i, parts) for every i in [0, parts) on torch's intra-op threads and returns when
/// all have returned. Inside a parallel region, or with one thread, at::parallel_for runs every part
/// on the calling thread, which symmarParallelForFn allows.
void symmarTorchParallelFor(symmarPartFn part, void* arg, int parts, void* /*user*/) {
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) part(arg, static_cast<int>(i), parts);
  });
}

}  // extern "C"

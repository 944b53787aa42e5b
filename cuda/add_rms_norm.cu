// Fused allreduce + residual add + RMSNorm (+ FP8 E4M3 output), split by rows: a block finishes a
// row as a whole (the row's statistic is a block reduction in a fixed tree order, so every rank
// that finishes a row computes the same bits).
//  - one-shot: every rank stages its rows; every rank sums all rows in rank order and finishes them.
//  - two-shot: every rank stages its rows; each finishes the rows it owns (its rank slice of the
//    chunk), writes them to its outputs and publishes residual, norm and fp8 rows in staging half 1;
//    after a second barrier every rank copies the other owners' rows.
// Row r of a chunk is handled by block (r - first row of its owner's slice) % grid on every rank, so
// per-block flags order every staging access, as in the plain kernels.
#include <cstdint>
#include <cuda_fp8.h>

#include "cuda/common.cuh"

namespace symmar {
namespace gpu {
namespace {

struct NormShared {
  BlockShared sh;
  float partial[kThreads];
};

/// The first row of r's owner slice, for the block assignment (one-shot: one slice, the chunk).
__device__ __forceinline__ size_t sliceBegin(size_t rows, int world, size_t r, bool two_shot) {
  if (!two_shot) return 0;
  for (int q = 0; q < world; ++q) {
    const sched::Range s = sched::rankSlice(rows, world, q, 1);
    if (r < s.end) return s.begin;
  }
  return 0;
}
__device__ __forceinline__ bool myRow(size_t rows, int world, size_t r, bool two_shot) {
  return (r - sliceBegin(rows, world, r, two_shot)) % gridDim.x == blockIdx.x;
}

__device__ __forceinline__ unsigned char toE4m3(float f) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

/// Finishes row `row` (index in the call) from every rank's staged copy of it at srcs + local row.
template <typename T>
__device__ __forceinline__ void finishRow(const KernelArgs& a, NormShared* ns, const typename T::Bits* const* srcs,
                                          size_t local, size_t row) {
  using Bits = typename T::Bits;
  const size_t h = a.hidden;
  const Bits* res_in = static_cast<const Bits*>(a.residual_in);
  Bits* res_out = static_cast<Bits*>(a.recv) + row * h;
  float ss = 0.0f;
  for (size_t i = threadIdx.x; i < h; i += kThreads) {
    float x = T::toFloat(srcs[0][local * h + i]);
#pragma unroll
    for (int p = 1; p < kMaxRanks; ++p) {
      if (p < a.world) x += T::toFloat(srcs[p][local * h + i]);
    }
    if (res_in) x += T::toFloat(res_in[row * h + i]);
    const Bits stored = T::fromFloat(x);
    res_out[i] = stored;
    const float r = T::toFloat(stored);
    ss += r * r;
  }
  ns->partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) ns->partial[threadIdx.x] += ns->partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / sqrtf(ns->partial[0] / static_cast<float>(h) + a.eps);
  __syncthreads();  // partial[0] read by every thread before the next row reuses it
  const Bits* gamma = static_cast<const Bits*>(a.gamma);
  Bits* norm = static_cast<Bits*>(a.norm_out) + row * h;
  for (size_t i = threadIdx.x; i < h; i += kThreads) {
    const float y = T::toFloat(res_out[i]) * inv * T::toFloat(gamma[i]);
    norm[i] = T::fromFloat(y);
    if (a.fp8_out) a.fp8_out[row * h + i] = toE4m3(y / a.fp8_scale);
  }
}

template <typename T, bool TwoShot>
__global__ void __launch_bounds__(kThreads) addRmsNormAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  SYMMAR_BLOCK_SHARED(NormShared, ns);
  uint32_t epoch;
  if (!blockBegin<T>(a, &ns.sh, &epoch)) return;
  const size_t h = a.hidden;
  const bool fp8 = a.fp8_out != nullptr;
  const size_t part_bytes = sched::fusedPartBytes(h * sizeof(Bits));  // parts of a published row
  const size_t out_row_bytes = sched::fusedRowBytes(h, sizeof(Bits), fp8, true);
  // > 0: checked by the host with the same function.
  const size_t per_chunk = sched::fusedRowsPerChunk(a.staging_bytes, h, sizeof(Bits), fp8, TwoShot);
  const size_t tokens = a.count / h;
  const Bits* input = static_cast<const Bits*>(a.send);
  const size_t half0 = sched::stagingHalfOffset(a.staging_bytes, 0);
  const size_t half1 = sched::stagingHalfOffset(a.staging_bytes, 1);
  for (size_t r0 = 0, k = 0; r0 < tokens; r0 += per_chunk, ++k) {
    const size_t rows = tokens - r0 < per_chunk ? tokens - r0 : per_chunk;
    // One-shot alternates halves between chunks; two-shot stages in half 0, publishes in half 1.
    const size_t in_half = TwoShot ? half0 : sched::stagingHalfOffset(a.staging_bytes, static_cast<int>(k & 1));
    Bits* own_in = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + in_half);
    for (size_t r = 0; r < rows; ++r) {
      if (!myRow(rows, a.world, r, TwoShot)) continue;
      for (size_t i = threadIdx.x; i < h; i += kThreads) own_in[r * h + i] = input[(r0 + r) * h + i];
    }
    if (!blockBarrier(a, &ns.sh, &epoch, kStagedInput)) return;
    const Bits* srcs[kMaxRanks];
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {
      srcs[p] = p < a.world ? reinterpret_cast<const Bits*>(a.base[p] + a.staging_off + in_half) : nullptr;
    }
    const sched::Range mine = TwoShot ? sched::rankSlice(rows, a.world, a.rank, 1) : sched::Range{0, rows};
    for (size_t r = mine.begin; r < mine.end; ++r) {
      if (!myRow(rows, a.world, r, TwoShot)) continue;
      finishRow<T>(a, &ns, srcs, r, r0 + r);
      if (TwoShot) {  // publish the finished row
        char* pub = a.base[a.rank] + a.staging_off + half1 + r * out_row_bytes;
        const Bits* res = static_cast<const Bits*>(a.recv) + (r0 + r) * h;
        const Bits* norm = static_cast<const Bits*>(a.norm_out) + (r0 + r) * h;
        for (size_t i = threadIdx.x; i < h; i += kThreads) {
          reinterpret_cast<Bits*>(pub)[i] = res[i];
          reinterpret_cast<Bits*>(pub + part_bytes)[i] = norm[i];
          if (a.fp8_out) reinterpret_cast<unsigned char*>(pub + 2 * part_bytes)[i] = a.fp8_out[(r0 + r) * h + i];
        }
      }
    }
    if (!TwoShot) continue;
    if (!blockBarrier(a, &ns.sh, &epoch, kStagedInput)) return;
    for (int q = 0; q < a.world; ++q) {
      if (q == a.rank) continue;
      const sched::Range theirs = sched::rankSlice(rows, a.world, q, 1);
      for (size_t r = theirs.begin; r < theirs.end; ++r) {
        if (!myRow(rows, a.world, r, true)) continue;
        const char* pub = a.base[q] + a.staging_off + half1 + r * out_row_bytes;
        Bits* res = static_cast<Bits*>(a.recv) + (r0 + r) * h;
        Bits* norm = static_cast<Bits*>(a.norm_out) + (r0 + r) * h;
        for (size_t i = threadIdx.x; i < h; i += kThreads) {
          res[i] = reinterpret_cast<const Bits*>(pub)[i];
          norm[i] = reinterpret_cast<const Bits*>(pub + part_bytes)[i];
          if (a.fp8_out) a.fp8_out[(r0 + r) * h + i] = reinterpret_cast<const unsigned char*>(pub + 2 * part_bytes)[i];
        }
      }
    }
  }
  blockEnd(a, &ns.sh, epoch, false);
}

template <typename T>
const void* formOf(bool two_shot) {
  return two_shot ? reinterpret_cast<const void*>(&addRmsNormAllReduce<T, true>)
                  : reinterpret_cast<const void*>(&addRmsNormAllReduce<T, false>);
}

}  // namespace

const void* addRmsNormKernel(symmarDataType_t dtype, bool two_shot) {
  switch (dtype) {
    case symmarFloat32:
      return formOf<F32>(two_shot);
    case symmarFloat16:
      return formOf<F16>(two_shot);
    case symmarBfloat16:
      return formOf<BF16>(two_shot);
    default:
      return nullptr;
  }
}

}  // namespace gpu
}  // namespace symmar

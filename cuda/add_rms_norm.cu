// Fused allreduce + residual add + RMSNorm (+ FP8 E4M3 output), split by rows: a block finishes a
// row as a whole (the row's statistic is a block reduction in a fixed order, so every rank
// that finishes a row from the same values computes the same bits).
//  - one-shot: every rank stages its rows; every rank sums all rows in rank order and finishes them.
//  - two-shot: every rank stages its rows; each reduces the rows it owns (its rank slice of the
//    chunk) in rank order and publishes their sums in staging half 1; after a second barrier every
//    rank finishes every row (residual add, norm, fp8) from its owner's sums. Only the sums cross
//    between ranks, and a rank's outputs all come from its own residual_in, as in the one-shot.
// Row r of every chunk is handled by group r % groups on every rank (RowGroup: a block a row, or,
// where a call has fewer rows than the grid may have blocks, a row's vectors split among a group of
// blocks, whose statistic adds their parts' sums in part order), and each block of a group takes
// the same part of the row on every rank, so per-block flags order every staging access, as in the
// plain kernels.
#include <cstdint>

#include "cuda/norm.cuh"

namespace symmar {
namespace gpu {
namespace {

/// Where a row's sources lie: every rank's input rows of the chunk (the fused forms: each rank's
/// staging half, or its input in place in its heap, as the start barrier told: sourceOf), or one
/// pointer (the unfused form's sums, or the two-shot's published sums: kSrcs 1). Peers' pointers
/// are formed where they are loaded, so they hold no registers across the row loops.
template <typename T>
struct RowSources {
  const typename T::Bits* single;
  const BlockShared* sh;
  size_t half;   ///< the staging half the chunk's rows are staged in
  size_t first;  ///< the chunk's first element in the call (where an input read in place starts)
};
template <typename T, int kSrcs>
__device__ __forceinline__ const typename T::Bits* sourceRow(const KernelArgs& a, const RowSources<T>& s, int p) {
  if (kSrcs == 1) return s.single;
  return sourceOf<T>(a, s.sh, p, s.half, s.first);
}

/// Finishes row `row` (index in the call) from every source's copy of it at row `local` there.
template <typename T, int kSrcs = kMaxRanks>
__device__ __forceinline__ void finishRow(const KernelArgs& a, NormShared<>* ns, const RowSources<T>& srcs,
                                          size_t local, size_t row) {
  using Bits = typename T::Bits;
  const size_t h = a.hidden;
  const Bits* res_in = static_cast<const Bits*>(a.residual_in);
  Bits* res_out = static_cast<Bits*>(a.recv) + row * h;
  float ss = 0.0f;
  for (size_t i = threadIdx.x; i < h; i += kThreads) {
    float x = T::toFloat(sourceRow<T, kSrcs>(a, srcs, 0)[local * h + i]);
#pragma unroll
    for (int p = 1; p < kSrcs; ++p) {
      if (p < a.world) x += T::toFloat(sourceRow<T, kSrcs>(a, srcs, p)[local * h + i]);
    }
    if (res_in) x += T::toFloat(res_in[row * h + i]);
    const Bits stored = T::fromFloat(x);
    res_out[i] = stored;
    const float r = T::toFloat(stored);
    ss += r * r;
  }
  const float inv = rowInvRms(ns, ss, h, a.eps);
  const Bits* gamma = static_cast<const Bits*>(a.gamma);
  Bits* norm = static_cast<Bits*>(a.norm_out) + row * h;
  const float fp8_mul = a.fp8_out ? fp8Multiplier(a) : 0.0f;
  for (size_t i = threadIdx.x; i < h; i += kThreads) {
    const float y = T::toFloat(res_out[i]) * inv * T::toFloat(gamma[i]);
    norm[i] = T::fromFloat(y);
    if (a.fp8_out) a.fp8_out[row * h + i] = toE4m3(y * fp8_mul);
  }
}

/// The sum pass of vectors [vr.begin, vr.end) of row `row` (rows of whole vectors, vectorRows), the
/// part of it this block takes (RowGroup): every source's vector summed in
/// rank order with residual_in, rounded once, stored to residual_out; returns this thread's sum of
/// squares of what it stored. Same arithmetic per element as finishRow, 16-byte accesses where a
/// buffer is aligned. kSrcs: the most sources (kMaxRanks, or 1 for a single source, the allreduce's
/// sums in user memory in the unfused form: loaded as srcs_al says, where staging rows are always
/// aligned).
template <typename T, int kSrcs>
__device__ __forceinline__ float sumRowVec(const KernelArgs& a, const RowSources<T>& srcs, size_t local, size_t row,
                                           sched::Range vr, bool srcs_al) {
  using Bits = typename T::Bits;
  constexpr int E = Vec<T>::kElems;
  const size_t h = a.hidden;
  const Bits* res_in = a.residual_in ? static_cast<const Bits*>(a.residual_in) + row * h : nullptr;
  Bits* res_out = static_cast<Bits*>(a.recv) + row * h;
  const bool in_al = vecAligned(a.residual_in), out_al = vecAligned(a.recv);
  float ss = 0.0f;
  for (size_t v = vr.begin + threadIdx.x; v < vr.end; v += kThreads) {
    const size_t i = v * E;
    VecAcc<T, symmarSum> acc;
    if (kSrcs == 1) {
      acc.first(loadUser<T>(srcs.single + local * h + i, srcs_al));
    } else {
      Vec<T> x[kSrcs];  // every rank's vector loaded before the sum, as the plain kernels do
#pragma unroll
      for (int p = 0; p < kSrcs; ++p) {
        if (p < a.world) x[p].u = ptx::ld_vec(sourceRow<T, kSrcs>(a, srcs, p) + local * h + i);
      }
      acc.first(x[0]);
#pragma unroll
      for (int p = 1; p < kSrcs; ++p) {
        if (p < a.world) acc.add(x[p]);
      }
    }
    storeSumVec<T>(&acc, res_in ? res_in + i : nullptr, in_al, res_out + i, out_al, &ss);
  }
  return ss;
}

/// Where row r of a chunk is summed from: its sources, and its row index among them.
template <typename T>
struct RowJob {
  RowSources<T> srcs;
  size_t local;
};

/// Finishes the rows this block's group takes of a chunk of `rows` rows that starts at row r0 of
/// the call: rows g.group, g.group + g.groups, ..., each summed from job(r), this block's part of
/// each. Rows of whole vectors go kRowBatch at a time: every row's sum pass, one block barrier for
/// all their statistics (and, where a row is spread over a group, one group barrier), then every
/// row's norm pass, so a block with several rows neither waits at a barrier per row nor holds its
/// warps in step between rows. Each row's arithmetic is the same as alone. Other rows go one at a
/// time (finishRow; the host spreads only rows of whole vectors). False when a group barrier failed.
template <typename T, int kSrcs, typename JobOf>
__device__ __forceinline__ bool finishMyRows(const KernelArgs& a, NormShared<>* ns, RowGroup* g, size_t r0, size_t rows,
                                             JobOf job, bool srcs_al = true) {
  const size_t step = g->groups;
  if (!vectorRows<T>(a.hidden)) {
    for (size_t r = g->group; r < rows; r += step) {
      const RowJob<T> j = job(r);
      finishRow<T, kSrcs>(a, ns, j.srcs, j.local, r0 + r);
    }
    return true;
  }
  const sched::Range vr = partVecs(*g, a.hidden / Vec<T>::kElems);
  for (size_t first = g->group; first < rows; first += kRowBatch * step) {
    int n = 0;
    for (size_t r = first; r < rows && n < kRowBatch; r += step, ++n) {
      const RowJob<T> j = job(r);
      addRowSquares(ns, n, sumRowVec<T, kSrcs>(a, j.srcs, j.local, r0 + r, vr, srcs_al));
    }
    __syncthreads();
    if (g->parts > 1 && !groupInvRms(a, ns, g, n)) return false;
    size_t row = r0 + first;
    for (int k = 0; k < n; ++k, row += step) {
      normRowVec<T, kThreads>(a, row, vr, g->parts > 1 ? ns->inv[k] : slotInvRms(ns, k, a.hidden, a.eps));
    }
    __syncthreads();  // every slot read before the next batch's stores
  }
  return true;
}

/// Copies n elements between a rank's buffer and staging (or between staging and a buffer), whole
/// vectors when vec (rows of whole vectors, the staging side aligned), element by element otherwise.
template <typename T>
__device__ __forceinline__ void copyRow(typename T::Bits* dst, const typename T::Bits* src, size_t n, bool vec) {
  if (vec) {
    constexpr int E = Vec<T>::kElems;
    const bool al = vecAligned(dst) && vecAligned(src);
    for (size_t i = threadIdx.x * E; i < n; i += kThreads * E) storeUser<T>(dst + i, loadUser<T>(src + i, al), al);
    return;
  }
  for (size_t i = threadIdx.x; i < n; i += kThreads) dst[i] = src[i];
}

template <typename T, bool TwoShot>
__global__ void __launch_bounds__(kThreads) addRmsNormAllReduce(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  SYMMAR_BLOCK_SHARED(NormShared<>, ns);
  uint32_t epoch;
  if (!blockBegin<T>(a, &ns.sh, &epoch)) return;
  const size_t h = a.hidden;
  // Elements from one staged row to the next: whole rows (one-shot), rows padded to a vector
  // boundary (two-shot, so a row's sums are reduced with vector loads whatever h is).
  const size_t stride = TwoShot ? sched::fusedRowBytes(h, sizeof(Bits), true) / sizeof(Bits) : h;
  // > 0: checked by the host with the same function.
  const size_t per_chunk = sched::fusedRowsPerChunk(a.staging_bytes, h, sizeof(Bits), TwoShot);
  const size_t tokens = a.count / h;
  const Bits* input = static_cast<const Bits*>(a.send);
  const bool vec = vectorRows<T>(h);
  const size_t half0 = sched::stagingHalfOffset(a.staging_bytes, 0);
  const size_t half1 = sched::stagingHalfOffset(a.staging_bytes, 1);
  // Peers read this rank's input rows in place from its heap (the host decided: no output of the
  // call overlaps them in the one-shot; in the two-shot an output is the input or apart from it).
  const bool peers_read_input = a.send_offset != kStagedInput;
  RowGroup g = rowGroupOf(a);
  // The elements of a row this block stages, reduces and finishes: its group's part of the row's
  // vectors (the whole row where rows are not whole vectors: a block a row).
  const sched::Range vr = vec ? partVecs(g, h / Vec<T>::kElems) : sched::Range{0, 0};
  const size_t part_begin = vec ? vr.begin * Vec<T>::kElems : 0, part_end = vec ? vr.end * Vec<T>::kElems : h;
  for (size_t r0 = 0, k = 0; r0 < tokens; r0 += per_chunk, ++k) {
    const size_t rows = tokens - r0 < per_chunk ? tokens - r0 : per_chunk;
    // One-shot alternates halves between chunks; two-shot stages in half 0, publishes in half 1.
    const size_t in_half = TwoShot ? half0 : sched::stagingHalfOffset(a.staging_bytes, static_cast<int>(k & 1));
    Bits* own_in = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + in_half);
    for (size_t r = 0; r < rows && !peers_read_input; ++r) {
      if (!g.takes(r)) continue;
      copyRow<T>(own_in + r * stride + part_begin, input + (r0 + r) * h + part_begin, part_end - part_begin, vec);
    }
    if (!blockBarrier(a, &ns.sh, &epoch, a.send_offset)) return;
    if (!TwoShot) {  // every row from every rank's input rows
      const RowSources<T> srcs{nullptr, &ns.sh, in_half, r0 * h};
      if (!finishMyRows<T, kMaxRanks>(a, &ns, &g, r0, rows, [srcs](size_t r) { return RowJob<T>{srcs, r}; })) return;
      continue;
    }
    // Two-shot: the sums of this rank's rows, reduced in rank order into its half 1; then, after
    // the second barrier, every rank finishes every row from its owner's sums.
    const sched::Range mine = sched::rankSlice(rows, a.world, a.rank, 1);
    Bits* own_sums = reinterpret_cast<Bits*>(a.base[a.rank] + a.staging_off + half1);
    for (size_t r = mine.begin; r < mine.end; ++r) {
      if (!g.takes(r)) continue;
      // Inputs read in place have rows of whole vectors (the host offers them only then), where
      // stride is h; a peer's offset for other rows is not followed (it would read past them).
      const Bits* src[kMaxRanks];
#pragma unroll
      for (int p = 0; p < kMaxRanks; ++p) {
        src[p] = p >= a.world ? nullptr
                 : vec        ? sourceOf<T>(a, &ns.sh, p, half0, r0 * h)
                              : reinterpret_cast<const Bits*>(a.base[p] + a.staging_off + half0);
      }
      reduceRange<T, symmarSum>(src, a.world, own_sums, nullptr,
                                sched::Range{r * stride + part_begin, r * stride + part_end}, true);
    }
    if (!blockBarrier(a, &ns.sh, &epoch, a.send_offset)) return;
    const bool done = finishMyRows<T, 1>(a, &ns, &g, r0, rows, [&a, rows, half1, stride](size_t r) {
      int q = 0;  // the row's owner: the rank whose slice holds it
      while (r >= sched::rankSlice(rows, a.world, q, 1).end) ++q;
      return RowJob<T>{{reinterpret_cast<const Bits*>(a.base[q] + a.staging_off + half1) + r * stride, nullptr, 0, 0}, 0};
    });
    if (!done) return;
  }
  // The one-shot's peers read this rank's input until they finish; the two-shot's only before the
  // second barrier of each chunk.
  blockEnd(a, &ns.sh, epoch, !TwoShot && peers_read_input);
}

/// The add and norm alone, on this rank, after an allreduce into a.send (the unfused call): rows
/// r, r + grid, ... of the sums, residual_in added, finished as the fused forms finish a row from a
/// single source. Whole vectors where rows are (the call decides, as above, so every rank sums a
/// row's squares in the same order), loaded as the sums' alignment on this rank allows.
template <typename T>
__global__ void __launch_bounds__(kThreads) addRmsNormRows(const SYMMAR_GRID_CONSTANT KernelArgs a) {
  using Bits = typename T::Bits;
  SYMMAR_BLOCK_SHARED(NormShared<>, ns);
  ptx::griddep_wait();  // the allreduce before it on the stream wrote the sums
  const RowSources<T> sums{static_cast<const Bits*>(a.send), nullptr, 0, 0};  // a.world 1: the only source
  RowGroup g = rowGroupOf(a);  // a block a row: no DeviceState here for a group barrier
  finishMyRows<T, 1>(a, &ns, &g, 0, a.count / a.hidden, [sums](size_t r) { return RowJob<T>{sums, r}; },
                     vecAligned(sums.single));
  ptx::griddep_launch_dependents();
}

template <typename T>
const void* formOf(bool two_shot) {
  return two_shot ? reinterpret_cast<const void*>(&addRmsNormAllReduce<T, true>)
                  : reinterpret_cast<const void*>(&addRmsNormAllReduce<T, false>);
}

}  // namespace

const void* addRmsNormRowsKernel(symmarDataType_t dtype) {
  switch (dtype) {
    case symmarFloat32:
      return reinterpret_cast<const void*>(&addRmsNormRows<F32>);
    case symmarFloat16:
      return reinterpret_cast<const void*>(&addRmsNormRows<F16>);
    case symmarBfloat16:
      return reinterpret_cast<const void*>(&addRmsNormRows<BF16>);
    default:
      return nullptr;
  }
}

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

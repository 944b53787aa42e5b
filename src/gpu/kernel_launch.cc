#include "gpu/kernel_launch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "plan/algorithms.h"

namespace symmar {
namespace gpu {
namespace {

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

HeapLayout makeLayout(size_t staging_bytes, size_t heap_bytes, int world) {
  HeapLayout l;
  l.staging_off = 0;  // first: the multicast object binds [0, staging) at offset 0 of the allocation
  l.staging_bytes = staging_bytes;
  l.pad_off = roundUp(staging_bytes, 256);
  l.lamport_off = roundUp(l.pad_off + kPadBytes, 256);
  l.lamport_bytes = sched::lamportAreaBytes(world);
  l.heap_off = roundUp(l.lamport_off + l.lamport_bytes, 256);
  l.heap_bytes = heap_bytes;
  l.total = l.heap_off + heap_bytes;
  return l;
}

std::vector<char> initialPad(uint32_t epoch_start) {
  std::vector<char> pad(kPadBytes, 0);
  for (int from = 0; from < kMaxRanks; ++from) {
    for (int b = 0; b < sched::kMaxBlocks; ++b) {
      for (int s = 0; s < sched::kBarrierSlots; ++s) {
        std::memcpy(pad.data() + padFlagOffset(from, b, s), &epoch_start, sizeof(epoch_start));
      }
    }
  }
  return pad;
}

std::vector<uint32_t> initialLamport(int world) {
  return std::vector<uint32_t>(sched::lamportAreaBytes(world) / sizeof(uint32_t), sched::kLamportEmpty);
}

int gridFor(const LaunchContext& ctx, size_t count, symmarDataType_t dtype, symmarAlgo_t algo) {
  const size_t elem = symmarTypeSize(dtype);
  const bool lamport = algo == symmarAlgoLamport;  // never chunked: at most kLamportMaxBytes
  const size_t chunk = lamport ? 0 : sched::chunkElems(ctx.layout.staging_bytes, elem, ctx.world);
  const size_t bytes = (chunk == 0 ? count : std::min(count, chunk)) * elem;
  const size_t per = std::max<size_t>(lamport ? ctx.lamport_bytes_per_block : ctx.bytes_per_block, 1);
  size_t blocks = (bytes + per - 1) / per;
  if (!lamport) {
    const size_t spread = std::max<size_t>(ctx.spread_bytes_per_block, 1);
    blocks = std::max(blocks, std::min((bytes + spread - 1) / spread, kSpreadBlocks));
  }
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(blocks, static_cast<size_t>(std::max(ctx.max_blocks, 1)))));
}

namespace {

/// Offset of [send, send + bytes) in this rank's allocation when it lies in one symmarMemAlloc block
/// at a vector boundary (peers may then read it), else kStagedInput.
uint64_t symmetricInputOffset(const LaunchContext& ctx, const void* send, size_t bytes) {
  if (!ctx.have_heap) return kStagedInput;
  const HeapLayout& l = ctx.layout;
  const uintptr_t heap = reinterpret_cast<uintptr_t>(ctx.bases[ctx.rank]) + l.heap_off;
  const uintptr_t s = reinterpret_cast<uintptr_t>(send);
  if (s < heap || s % sched::kVecBytes != 0 || bytes > l.heap_bytes || s - heap > l.heap_bytes - bytes) {
    return kStagedInput;
  }
  if (!ctx.arena || !ctx.arena->contains(s - heap, bytes, nullptr)) return kStagedInput;
  return l.heap_off + (s - heap);
}

}  // namespace

uint64_t inPlaceInputOffset(const LaunchContext& ctx, const void* send, const void* recv, size_t bytes,
                            symmarAlgo_t algo) {
  if (!algorithmTraits(algo).peers_read_inputs_in_place) return kStagedInput;
  const uint64_t offset = symmetricInputOffset(ctx, send, bytes);
  if (offset == kStagedInput) return kStagedInput;
  const uintptr_t s = reinterpret_cast<uintptr_t>(send);
  const uintptr_t r = reinterpret_cast<uintptr_t>(recv);
  const bool disjoint = s + bytes <= r || r + bytes <= s;
  // One-shot writes its output while peers may still read its input: only disjoint buffers.
  // Two-shot overwrites a slice only after every peer has read it: in place is fine as well.
  if (!disjoint && (algo == symmarAlgoOneShot || s != r)) return kStagedInput;
  return offset;
}

void inputOffsetBounds(const LaunchContext& ctx, size_t bytes, uint64_t* lo, uint64_t* span) {
  *lo = ctx.layout.heap_off;
  *span = ctx.have_heap && bytes <= ctx.layout.heap_bytes ? ctx.layout.heap_bytes - bytes + 1 : 0;
}

KernelArgs makeKernelArgs(const LaunchContext& ctx, const void* send, void* recv, size_t count, symmarDataType_t dtype,
                          symmarAlgo_t algo, uint64_t signature) {
  const size_t elem = symmarTypeSize(dtype);
  KernelArgs a{};
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.rank = ctx.rank;
  a.world = ctx.world;
  for (int r = 0; r < ctx.world && r < kMaxRanks; ++r) a.base[r] = ctx.bases[r];
  a.mc_base = ctx.mc_base;
  a.pad_off = ctx.layout.pad_off;
  a.staging_off = ctx.layout.staging_off;
  a.lamport_off = ctx.layout.lamport_off;
  a.staging_bytes = ctx.layout.staging_bytes;
  a.chunk_elems = sched::chunkElems(ctx.layout.staging_bytes, elem, ctx.world);
  a.send_offset = inPlaceInputOffset(ctx, send, recv, count * elem, algo);
  inputOffsetBounds(ctx, count * elem, &a.input_lo, &a.input_span);
  a.aligned = (reinterpret_cast<uintptr_t>(send) | reinterpret_cast<uintptr_t>(recv)) % sched::kVecBytes == 0;
  a.state = ctx.state;
  a.status = ctx.status;
  a.timeout_ns = ctx.timeout_ns;
  a.signature = signature;
  return a;
}

const void* scatterGatherKernelOf(symmarAlgo_t algo, Collective coll, symmarDataType_t dtype, symmarRedOp_t op,
                                  bool multicast) {
  const bool through_switch = algo == symmarAlgoMultimem;
  if ((algo != symmarAlgoOneShot && !through_switch) || (through_switch && !multicast)) return nullptr;
  if (coll == Collective::kReduceScatter) {
    return through_switch ? multimemReduceScatterKernel(dtype, op) : reduceScatterKernel(dtype, op);
  }
  if (coll != Collective::kAllGather) return nullptr;
  // A copy: wider elements move as 4-byte words.
  const size_t elem = symmarTypeSize(dtype) == 8 ? 4 : symmarTypeSize(dtype);
  return through_switch ? multimemAllGatherKernel(elem) : allGatherKernel(elem);
}

KernelArgs makeScatterGatherArgs(const LaunchContext& ctx, const ScatterGatherCall& c, int* grid) {
  const bool scatter = c.coll == Collective::kReduceScatter;
  const size_t elem = c.elem();
  const size_t words = scatter || elem != 8 ? 1 : 2;  // kernel elements per element
  const size_t kelem = elem / words, count = c.count * words;
  const symmarDataType_t kdtype = scatter ? c.dtype : (kelem == 2 ? symmarFloat16 : symmarFloat32);
  const size_t block = count * kelem, input = scatter ? block * static_cast<size_t>(ctx.world) : block;
  const bool through_switch = c.algo == symmarAlgoMultimem;
  KernelArgs a = makeKernelArgs(ctx, c.send, c.recv, count, kdtype, symmarAlgoOneShot, callSignature(c));
  a.recv_count = scatter ? 0 : count * static_cast<size_t>(ctx.world);
  // A reduce-scatter stages the world blocks' chunks side by side in a half, and the multimem
  // all-gather gathers the world's chunks side by side in one.
  a.chunk_elems =
      sched::chunkElems(ctx.layout.staging_bytes, kelem, ctx.world) / (scatter || through_switch ? ctx.world : 1);
  // Blocks sit count elements apart: vector accesses to them need count to keep the alignment.
  a.aligned = a.aligned && block % sched::kVecBytes == 0;
  // Peers read an input in place from their block's offset in it (a reduce-scatter) or its start.
  // In place is safe here: no rank writes what a peer reads (its own block of either buffer).
  // Multimem always stages: the multicast view needs the same offset on every rank.
  a.send_offset = through_switch || (scatter && block % sched::kVecBytes != 0) ? kStagedInput
                                                                               : symmetricInputOffset(ctx, c.send, input);
  inputOffsetBounds(ctx, input, &a.input_lo, &a.input_span);
  const size_t chunk = std::min(count, a.chunk_elems);
  const size_t per = std::max<size_t>(ctx.bytes_per_block, 1);
  const size_t blocks = (chunk * kelem * static_cast<size_t>(ctx.world) + per - 1) / per;
  *grid = static_cast<int>(std::max<size_t>(1, std::min<size_t>(blocks, static_cast<size_t>(std::max(ctx.max_blocks, 1)))));
  return a;
}

size_t addRmsNormRowBytes(const AddRmsNormCall& call, bool two_shot) {
  return sched::fusedRowBytes(call.hidden, symmarTypeSize(call.dtype), two_shot);
}

size_t addRmsNormRowsPerChunk(const LaunchContext& ctx, const AddRmsNormCall& call, bool two_shot) {
  return sched::fusedRowsPerChunk(ctx.layout.staging_bytes, call.hidden, symmarTypeSize(call.dtype), two_shot);
}

uint64_t fusedInputOffset(const LaunchContext& ctx, const AddRmsNormCall& call, bool two_shot) {
  const size_t elem = symmarTypeSize(call.dtype), bytes = call.tokens * call.hidden * elem;
  // Rows of whole vectors only: the two-shot reduces a row at the stride of its staged rows, which
  // is the row itself only then (and the one-shot's vector loads need every row aligned).
  if ((call.hidden * elem) % sched::kVecBytes != 0) return kStagedInput;
  const uint64_t offset = symmetricInputOffset(ctx, call.input, bytes);
  if (offset == kStagedInput) return kStagedInput;
  const auto apart = [&](const void* out, size_t out_bytes) {
    const uintptr_t i = reinterpret_cast<uintptr_t>(call.input), o = reinterpret_cast<uintptr_t>(out);
    return out == nullptr || i + bytes <= o || o + out_bytes <= i;
  };
  // The one-shot writes a row's outputs while peers may still read that row of its input: no
  // overlap at all. The two-shot writes row r only after its owner has read row r of every input
  // (the second barrier of that row's block): an output that is the input, row for row, is safe.
  const auto fits = [&](const void* out) { return apart(out, bytes) || (two_shot && out == call.input); };
  if (!fits(call.residual_out) || !fits(call.norm_out) || !apart(call.fp8_out, call.tokens * call.hidden)) {
    return kStagedInput;
  }
  return offset;
}

namespace {
/// The fused call's own arguments (its residual, norm, gamma, FP8 output and row size).
void setNormArgs(const AddRmsNormCall& call, KernelArgs* a) {
  a->residual_in = call.residual_in;
  a->norm_out = call.norm_out;
  a->gamma = call.gamma;
  a->fp8_out = static_cast<unsigned char*>(call.fp8_out);
  a->fp8_scale = call.fp8_scale;
  a->eps = call.eps;
  a->hidden = call.hidden;
}
}  // namespace

KernelArgs makeAddRmsNormArgs(const LaunchContext& ctx, const AddRmsNormCall& call, symmarAlgo_t form, int* grid) {
  const bool lamport = form == symmarAlgoLamport;
  KernelArgs a = makeKernelArgs(ctx, call.input, call.residual_out, call.tokens * call.hidden, call.dtype,
                                lamport ? symmarAlgoLamport : symmarAlgoTwoShot, callSignature(call, form));
  if (lamport) {
    // Peers read nothing of this rank's (makeKernelArgs left send_offset staged: its rows are
    // pushed). `aligned` tells how the input is read; the outputs' alignment is the norm code's.
    a.aligned = reinterpret_cast<uintptr_t>(call.input) % sched::kVecBytes == 0;
  } else {
    a.send_offset = fusedInputOffset(ctx, call, form == symmarAlgoTwoShot);
    inputOffsetBounds(ctx, call.tokens * call.hidden * symmarTypeSize(call.dtype), &a.input_lo, &a.input_span);
    a.aligned = 0;
  }
  setNormArgs(call, &a);
  // A block a row, up to the co-residency cap, so a call's rows are finished side by side; where
  // the cap leaves room, a row spread over a group of blocks.
  a.row_parts = addRmsNormRowParts(call, ctx.max_blocks, ctx.max_row_parts, lamport ? kLamportThreads : kThreads);
  const size_t blocks = call.tokens * static_cast<size_t>(a.row_parts);
  *grid = static_cast<int>(std::max<size_t>(1, std::min<size_t>(blocks, static_cast<size_t>(ctx.max_blocks))));
  return a;
}

int addRmsNormRowParts(const AddRmsNormCall& call, int max_blocks, int max_parts, int threads) {
  const size_t vec = sched::vecElems(symmarTypeSize(call.dtype));
  if (call.tokens == 0 || call.hidden % vec != 0 || max_blocks < 2) return 1;
  // About one vector a thread; a grid of tokens x parts within the cap (every block of a group
  // co-resident, which its barrier needs).
  const size_t per_block = static_cast<size_t>(std::max(threads, 1));
  const size_t by_threads = (call.hidden / vec + per_block - 1) / per_block;
  const size_t by_grid = static_cast<size_t>(max_blocks) / call.tokens;
  const size_t most = static_cast<size_t>(std::max(1, std::min(max_parts, kMaxRowParts)));
  return static_cast<int>(std::max<size_t>(1, std::min({by_threads, by_grid, most})));
}

KernelArgs makeAddRmsNormRowsArgs(const AddRmsNormCall& call, const void* sums, int max_grid, int* grid) {
  KernelArgs a{};
  a.rank = 0;
  a.world = 1;  // one source, the sums: no peer takes part
  a.send = sums;
  a.recv = call.residual_out;
  a.count = call.tokens * call.hidden;
  setNormArgs(call, &a);
  const int cap = std::max(1, std::min(max_grid, kAddRmsNormRowsBlocks));
  *grid = static_cast<int>(std::max<size_t>(1, std::min<size_t>(call.tokens, static_cast<size_t>(cap))));
  return a;
}

ProbeArgs makeProbeArgs(const LaunchContext& ctx, long long* result) {
  ProbeArgs p{};
  p.rank = ctx.rank;
  p.world = ctx.world;
  for (int r = 0; r < ctx.world && r < kMaxRanks; ++r) p.base[r] = ctx.bases[r];
  p.pad_off = ctx.layout.pad_off;
  p.rounds = kProbeRounds;
  // The first round waits out the launch skew of processes that left one bootstrap barrier together.
  p.first_ns = std::min<long long>(ctx.timeout_ns, 2000000000ll);
  p.rest_ns = kProbeRestNs;
  p.staging_off = ctx.layout.staging_off;
  p.result = result;
  return p;
}

namespace {

/// The allreduce kernels: one row per algorithm that has a kernel.
struct AlgoKernel {
  symmarAlgo_t algo;
  const void* (*entry)(symmarDataType_t, symmarRedOp_t);
  int threads;
};
const AlgoKernel kAlgoKernels[] = {
    {symmarAlgoOneShot, oneShotKernel, kThreads},
    {symmarAlgoTwoShot, twoShotKernel, kThreads},
    {symmarAlgoMultimem, multimemKernel, kThreads},
    {symmarAlgoLamport, lamportKernel, kLamportThreads},
};
constexpr symmarDataType_t kKernelDtypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16};

const AlgoKernel* algoKernel(symmarAlgo_t algo) {
  for (const AlgoKernel& k : kAlgoKernels) {
    if (k.algo == algo) return &k;
  }
  return nullptr;
}

}  // namespace

const void* kernelOf(symmarAlgo_t algo, symmarDataType_t dtype, symmarRedOp_t op, bool multicast) {
  const AlgoKernel* k = algoKernel(algo);
  if (!k || (algo == symmarAlgoMultimem && !multicast)) return nullptr;
  return k->entry(dtype, op);
}

int threadsFor(symmarAlgo_t algo) {
  const AlgoKernel* k = algoKernel(algo);
  return k ? k->threads : kThreads;
}

std::vector<KernelShape> everyKernel() {
  std::vector<KernelShape> out;
  for (symmarDataType_t dt : kKernelDtypes) {
    for (int o = 0; o < symmarNumOps; ++o) {
      for (const AlgoKernel& k : kAlgoKernels) out.push_back({k.entry(dt, static_cast<symmarRedOp_t>(o)), k.threads});
    }
    for (bool two_shot : {false, true}) out.push_back({addRmsNormKernel(dt, two_shot), kThreads});
    out.push_back({lamportAddRmsNormKernel(dt), kLamportThreads});
    out.push_back({addRmsNormRowsKernel(dt), kThreads});  // no peer: listed to be loaded at creation
    for (int o = 0; o < symmarNumOps; ++o) {
      out.push_back({reduceScatterKernel(dt, static_cast<symmarRedOp_t>(o)), kThreads});
      out.push_back({multimemReduceScatterKernel(dt, static_cast<symmarRedOp_t>(o)), kThreads});
    }
  }
  for (size_t elem : {2, 4}) {
    out.push_back({allGatherKernel(elem), kThreads});
    out.push_back({multimemAllGatherKernel(elem), kThreads});
  }
  return out;
}

}  // namespace gpu
}  // namespace symmar

// Google Benchmark micro-benchmarks: planner lookup, C API overhead of a 1-element host
// allreduce, table-file parsing, and the host kernels (reduceRanks, copyBytes, the fused norm's
// row) against memcpy.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host/add_rms_norm.h"
#include "host/host_reduce.h"
#include "host/simd_reduce.h"
#include "plan/planner.h"
#include "plan/table.h"
#include "symmar/symmar.h"

namespace {

void BM_SymmarPlan(benchmark::State& state) {
  symmarTopology_t topo{12, 0, symmarLinkPcie, 8, 0};
  symmarAlgo_t algo;
  size_t count = 7168;
  for (auto _ : state) {
    benchmark::DoNotOptimize(symmarPlan(&topo, count, symmarBfloat16, symmarSum, &algo));
    count ^= 1;
  }
}
BENCHMARK(BM_SymmarPlan);

void BM_UnknownCapabilityPlan(benchmark::State& state) {  // walks the whole lookup chain
  symmarTopology_t topo{13, 5, symmarLinkNvSwitch, 5, 1};
  symmarAlgo_t algo;
  for (auto _ : state) benchmark::DoNotOptimize(symmarPlan(&topo, 1 << 20, symmarBfloat16, symmarSum, &algo));
}
BENCHMARK(BM_UnknownCapabilityPlan);

void BM_HostAllReduceOneElement(benchmark::State& state) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  symmarComm_t comm = nullptr;
  if (symmarCommInitAll(&comm, 1, nullptr, &cfg) != symmarSuccess) {
    state.SkipWithError(symmarGetLastError(nullptr));
    return;
  }
  float x = 1;
  for (auto _ : state) benchmark::DoNotOptimize(symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, nullptr));
  symmarCommDestroy(comm);
}
BENCHMARK(BM_HostAllReduceOneElement);

void BM_TableFileParse(benchmark::State& state) {
  std::string text = "{\"rows\": [";
  for (int w = 2; w <= 8; ++w) {
    for (const char* link : {"nvswitch", "nvlink", "pcie"}) {
      text += std::string(text.back() == '[' ? "" : ",") + "{\"arch\": \"sm120\", \"link\": \"" + link +
              "\", \"world\": " + std::to_string(w) +
              ", \"algos\": [{\"algo\": \"oneshot\", \"max_bytes\": \"64K\"}, {\"algo\": \"twoshot\", \"max_bytes\": "
              "\"16M\"}]}";
    }
  }
  text += "]}";
  for (auto _ : state) {
    symmar::Tables t = symmar::Tables::builtin();
    benchmark::DoNotOptimize(t.loadJson(text, "bench"));
  }
}
BENCHMARK(BM_TableFileParse);

// Buffers of `bytes` each, page-aligned and then placed `offset` bytes into their first page:
// where a buffer starts within a page decides whether a copy meets 4 KiB aliasing (host_reduce.h's
// copyBytes), so every kernel below is measured with the placement stated.
class PlacedBuffers {
 public:
  PlacedBuffers(int count, size_t bytes, const std::vector<size_t>& offsets) {
    for (int i = 0; i < count; ++i) {
      const size_t offset = i < static_cast<int>(offsets.size()) ? offsets[i] : 0;
      const size_t span = (bytes + offset + 4095) / 4096 * 4096;
      char* base = static_cast<char*>(std::aligned_alloc(4096, span));
      std::memset(base, 0x3c, span);  // small finite values in every format (no NaN path)
      bases_.push_back(base);
      ptrs_.push_back(base + offset);
    }
  }
  ~PlacedBuffers() {
    for (char* b : bases_) std::free(b);
  }
  char* operator[](int i) const { return ptrs_[static_cast<size_t>(i)]; }

 private:
  std::vector<char*> bases_, ptrs_;
};

// memcpy and copyBytes of `bytes` from a page-aligned source to a destination `offset` bytes past
// a page (0: aligned alike; 16: where malloc puts a large buffer). Bytes processed: 1 read, 1 written.
void libcMemcpy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void BM_Copy(benchmark::State& state, void (*copy)(void*, const void*, size_t)) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  PlacedBuffers buf(2, bytes, {0, static_cast<size_t>(state.range(1))});
  for (auto _ : state) {
    copy(buf[1], buf[0], bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * bytes));
}
void copySizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : {16 << 10, 64 << 10, 256 << 10, 16 << 20}) {
    for (int64_t offset : {0, 16}) b->Args({bytes, offset});
  }
}
BENCHMARK_CAPTURE(BM_Copy, memcpy, &libcMemcpy)->Apply(copySizes);
BENCHMARK_CAPTURE(BM_Copy, copyBytes, &symmar::copyBytes)->Apply(copySizes);

// reduceRanks summing 2 sources of `bytes` bytes each into a third buffer, at sizes in L1, L2 and
// beyond the last-level cache (64 KiB: all three buffers in a 512 KiB L2, as memcpy's two are at
// 256 KiB; at 256 KiB the reduction's three need 768 KiB); the buffers start at `offsets` into
// their pages (page-aligned when none are given). Bytes processed counts the memory traffic: 2
// buffers read, 1 written, so GB/s compares with BM_Copy/memcpy (1 read, 1 written) as a bandwidth.
void BM_ReduceRanks2(benchmark::State& state, symmarDataType_t dtype, std::vector<size_t> offsets) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t elem = dtype == symmarFloat64 ? 8 : (dtype == symmarFloat16 || dtype == symmarBfloat16) ? 2 : 4;
  const size_t n = bytes / elem;
  PlacedBuffers buf(3, bytes, offsets);
  const void* srcs[2] = {buf[0], buf[1]};
  for (auto _ : state) {
    symmar::reduceRanks(buf[2], nullptr, srcs, 2, n, dtype, symmarSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}
const std::vector<size_t> kPageAligned;
void reduceSizes(benchmark::internal::Benchmark* b) {  // 2 KiB: a 4 KiB two-shot's slice at 2 ranks
  for (int64_t bytes : {2 << 10, 16 << 10, 64 << 10, 256 << 10, 16 << 20}) b->Arg(bytes);
}
BENCHMARK_CAPTURE(BM_ReduceRanks2, f32, symmarFloat32, kPageAligned)->Apply(reduceSizes);
BENCHMARK_CAPTURE(BM_ReduceRanks2, f64, symmarFloat64, kPageAligned)->Apply(reduceSizes);
BENCHMARK_CAPTURE(BM_ReduceRanks2, i32, symmarInt32, kPageAligned)->Apply(reduceSizes);
BENCHMARK_CAPTURE(BM_ReduceRanks2, bf16, symmarBfloat16, kPageAligned)->Apply(reduceSizes);
BENCHMARK_CAPTURE(BM_ReduceRanks2, f16, symmarFloat16, kPageAligned)->Apply(reduceSizes);
// The first source and the destination 16 bytes past a page (a caller's malloc'ed buffers), the
// second page-aligned (a heap slot), as two-shot's reduction of a caller's buffer meets them.
BENCHMARK_CAPTURE(BM_ReduceRanks2, f32_caller_buffers, symmarFloat32, std::vector<size_t>{16, 0, 16})
    ->Arg(16 << 10)
    ->Arg(256 << 10)
    ->Arg(16 << 20);

// The two-shot owner's step of a large call at 2 ranks: its own input slice and the peer's staged
// slice reduced into its output and its published slice (2 read, 2 written), offsets into their
// pages in that order: the staging side at a page boundary, the caller's buffers where the
// allocator put them. Bytes processed: 4 streams.
void BM_OwnerStep(benchmark::State& state, symmarDataType_t dtype, std::vector<size_t> offsets) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t n = bytes / (dtype == symmarFloat32 ? 4 : 2);
  PlacedBuffers buf(4, bytes, offsets);
  const void* srcs[2] = {buf[0], buf[1]};
  for (auto _ : state) {
    symmar::reduceRanks(buf[2], buf[3], srcs, 2, n, dtype, symmarSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(4 * bytes));
}
#define OWNER_STEP(name, ...)                                                                     \
  BENCHMARK_CAPTURE(BM_OwnerStep, bf16_##name, symmarBfloat16, std::vector<size_t>{__VA_ARGS__}) \
      ->Arg(8 << 20);                                                                             \
  BENCHMARK_CAPTURE(BM_OwnerStep, f32_##name, symmarFloat32, std::vector<size_t>{__VA_ARGS__})->Arg(8 << 20)
OWNER_STEP(all_at_0, 0, 0, 0, 0);
OWNER_STEP(caller_at_64, 64, 0, 64, 0);
OWNER_STEP(caller_at_16, 16, 0, 16, 0);
OWNER_STEP(caller_at_2048, 2048, 0, 2048, 0);
OWNER_STEP(out_64_past_in, 0, 2048, 64, 1024);
OWNER_STEP(spread, 0, 1024, 2048, 3072);

// One row of the fused allreduce + residual add + RMSNorm (finishAddRmsNormRow: 2 ranks' rows
// summed, the residual added, residual_out and norm_out written), hidden 7168 as a decode step of
// a large model. The ranks' rows are page-aligned (heap slots); residual, gamma and the outputs sit
// at distinct offsets into their pages, as separately allocated tensors do, so that no load meets
// 4 KiB aliasing with a recent store. Bytes processed: 4 rows read, 2 written.
void BM_AddRmsNormRow(benchmark::State& state, symmarDataType_t dtype) {
  const size_t hidden = 7168;
  const size_t elem = dtype == symmarFloat32 ? 4 : 2;
  const size_t bytes = hidden * elem;
  PlacedBuffers buf(6, bytes, {0, 0, 256, 768, 1280, 1792});
  symmar::AddRmsNormCall c{};
  c.residual_in = buf[2];
  c.gamma = buf[3];
  c.residual_out = buf[4];
  c.norm_out = buf[5];
  c.eps = 1e-6f;
  c.tokens = 1;
  c.hidden = hidden;
  c.dtype = dtype;
  const void* rows[2] = {buf[0], buf[1]};
  for (auto _ : state) {
    symmar::finishAddRmsNormRow(c, 0, rows, 2);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(6 * bytes));
}
BENCHMARK_CAPTURE(BM_AddRmsNormRow, bf16, symmarBfloat16);
BENCHMARK_CAPTURE(BM_AddRmsNormRow, f16, symmarFloat16);
BENCHMARK_CAPTURE(BM_AddRmsNormRow, f32, symmarFloat32);

}  // namespace

// BENCHMARK_MAIN, with the SIMD target the host kernels run in the context printed above the results.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simd_target", symmar::simdReduceTargetName(symmar::simdReduceCurrentTarget()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

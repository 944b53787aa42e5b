// Google Benchmark micro-benchmarks: planner lookup, C API overhead of a 1-element host
// allreduce, table-file parsing, and the host reduction kernel (reduceRanks) against memcpy.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "host/host_reduce.h"
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

// reduceRanks summing 2 sources of `bytes` bytes each into a third buffer, at sizes in L1, L2 and
// beyond the last-level cache. Bytes processed counts the memory traffic: 2 buffers read, 1 written,
// so GB/s compares with BM_Memcpy (1 read, 1 written) as a bandwidth.
void BM_ReduceRanks2(benchmark::State& state, symmarDataType_t dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t elem = dtype == symmarFloat64 ? 8 : (dtype == symmarFloat16 || dtype == symmarBfloat16) ? 2 : 4;
  const size_t n = bytes / elem;
  // 0x3c: small finite values in every format (no NaN fix-up path, like real data).
  std::vector<unsigned char> a(bytes, 0x3c), b(bytes, 0x3c), dst(bytes);
  const void* srcs[2] = {a.data(), b.data()};
  for (auto _ : state) {
    symmar::reduceRanks(dst.data(), nullptr, srcs, 2, n, dtype, symmarSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}
BENCHMARK_CAPTURE(BM_ReduceRanks2, f32, symmarFloat32)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceRanks2, f64, symmarFloat64)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceRanks2, i32, symmarInt32)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceRanks2, bf16, symmarBfloat16)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceRanks2, f16, symmarFloat16)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<unsigned char> a(bytes, 0x3c), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), a.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * bytes));
}
BENCHMARK(BM_Memcpy)->Arg(16 << 10)->Arg(256 << 10)->Arg(16 << 20);

}  // namespace

BENCHMARK_MAIN();

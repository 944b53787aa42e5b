// Google Benchmark micro-benchmarks: planner lookup, C API overhead of a 1-element host
// allreduce, and table-file parsing.
#include <benchmark/benchmark.h>

#include <string>

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

}  // namespace

BENCHMARK_MAIN();

// symmar_perf: allreduce (or reduce-scatter, all-gather: -C) latency and bandwidth per message size,
// nccl-tests style.
//   mpirun -np N symmar_perf [flags]       one rank per process (per GPU, or CPU ranks)
//   symmar_perf --local-world N [flags]    N ranks as threads of this process (N ranks on one GPU)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/names.h"
#include "perf_cli.h"

namespace {

using perf::Options;
using perf::Result;

std::string dtypeList(const Options& opt) {
  if (opt.dtypes.empty()) return perf::typeName(opt.dtype);
  std::string out;
  for (symmarDataType_t d : opt.dtypes) out += std::string(out.empty() ? "" : ",") + perf::typeName(d);
  return out;
}

void printResults(const Options& opt, const std::vector<Result>& results) {
  // The plan column: what auto ran, which symmarCommPlan tells for an allreduce.
  const bool plan = opt.coll == symmar::Collective::kAllReduce;
  const char* op = opt.coll == symmar::Collective::kAllGather ? "none" : symmar::opName(opt.op);
  // Results come grouped by variant (algorithm, dtype); several dtypes name theirs in the titles.
  const bool dtypes = opt.dtypes.size() > 1;
  symmarAlgo_t current = symmarNumAlgos;
  symmarDataType_t current_dtype = opt.dtype;
  double bw_sum = 0;
  int bw_n = 0;
  auto footer = [&] {
    if (current != symmarNumAlgos && bw_n) {
      printf("# Avg bus bandwidth (%s%s%s): %.3f GB/s\n#\n", symmarAlgoName(current), dtypes ? ", " : "",
             dtypes ? perf::typeName(current_dtype) : "", bw_sum / bw_n);
    }
  };
  for (const Result& r : results) {
    if (r.algo != current || r.dtype != current_dtype) {
      footer();
      current = r.algo;
      current_dtype = r.dtype;
      bw_sum = 0;
      bw_n = 0;
      printf("# %s, algorithm: %s%s%s\n", symmar::collectiveName(opt.coll), symmarAlgoName(r.algo),
             dtypes ? ", dtype: " : "", dtypes ? perf::typeName(r.dtype) : "");
      printf("# %12s %12s %8s %6s %11s %12s %12s %7s %21s%s\n", "size", "count", "type", "redop", "time(us)",
             "algbw(GB/s)", "busbw(GB/s)", "#wrong", "min-max(us)", plan && r.algo == symmarAlgoAuto ? "  plan" : "");
    }
    char spread[48];
    snprintf(spread, sizeof spread, "%.2f-%.2f", r.min_us, r.max_us);
    printf("  %12zu %12zu %8s %6s %11.2f %12.3f %12.3f %7ld %21s", r.bytes, r.count, perf::typeName(r.dtype), op,
           r.time_us, r.algbw_gbs, r.busbw_gbs, r.wrong, spread);
    if (plan && r.algo == symmarAlgoAuto) printf("  %s", symmarAlgoName(r.planned));
    printf("\n");
    bw_sum += r.busbw_gbs;
    ++bw_n;
  }
  footer();
}

void writeJson(const Options& opt, int world, bool gpu, const std::string& device, const std::vector<Result>& results) {
  std::ofstream out(opt.json);
  out << "{\"world\": " << world << ", \"backend\": \"" << (gpu ? "cuda" : "host") << "\", \"device\": \"" << device
      << "\", \"collective\": \"" << symmar::collectiveName(opt.coll) << "\", \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << (i ? ",\n  " : "\n  ") << "{\"algo\": \"" << symmarAlgoName(r.algo) << "\", \"bytes\": " << r.bytes
        << ", \"count\": " << r.count << ", \"dtype\": \"" << perf::typeName(r.dtype) << "\", \"time_us\": "
        << r.time_us << ", \"min_us\": " << r.min_us << ", \"max_us\": " << r.max_us
        << ", \"algbw_gbs\": " << r.algbw_gbs << ", \"busbw_gbs\": " << r.busbw_gbs
        << ", \"wrong\": " << r.wrong << ", \"plan\": \"" << symmarAlgoName(r.planned) << "\"}";
  }
  out << "\n]}\n";
}

/// /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never": the bracketed one holds).
std::string thpSetting() {
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char line[128] = "unknown (no transparent huge pages here)";
  if (f && !fgets(line, sizeof line, f)) line[0] = 0;
  if (f) fclose(f);
  line[strcspn(line, "\n")] = 0;
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  // Ranks that share a GPU (or a process driving several) need their kernels resident at once: more
  // hardware queues than the default 8 keep their streams from serialising. Read at context
  // creation, so set before the first CUDA call; a user's own value wins.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  perf::startLauncher(&argc, &argv);
  Options opt;
  // The fused call has its own benchmarks (symmar_norm_perf, symmar_tune -C addrmsnorm).
  if (!perf::parseArgs(argc, argv, &opt) || opt.coll == symmar::Collective::kAddRmsNorm) {
    perf::printUsage(argv[0], "");
    return 2;
  }
  return perf::launch(opt, [&](perf::Group& group, symmarComm_t comm, int gpu_device, const char* launch_desc) {
    std::vector<Result> results;
    std::string error;
    bool ok = perf::runSweep(comm, group, opt, gpu_device, &results, &error);
    long wrong = 0;
    for (const Result& r : results) wrong += r.wrong;
    if (group.rank() == 0) {
      char desc[1024] = "";
      symmarCommDescribe(comm, desc, sizeof(desc));
      char host[128] = "";
      gethostname(host, sizeof(host) - 1);
      printf("# symmar_perf: %s, %d ranks (%s) on %s, %s %s, iters %d, warmup %d, check %d, graph %d\n",
             symmar::collectiveName(opt.coll), group.size(), launch_desc, host, dtypeList(opt).c_str(),
             symmar::opName(opt.op), opt.iters, opt.warmup, opt.check, opt.graph);
      printf("# %s\n", desc);
      if (opt.huge_pages && gpu_device < 0) printf("# host buffers advised into huge pages; the kernel's setting: %s\n", thpSetting().c_str());
      printf("#\n");
      if (ok) printResults(opt, results);
      if (!ok) fprintf(stderr, "symmar_perf: %s\n", error.c_str());
      if (ok && !opt.json.empty()) writeJson(opt, group.size(), gpu_device >= 0, gpu_device >= 0 ? "gpu" : host, results);
      if (wrong) printf("# %ld wrong results\n", wrong);
      fflush(stdout);
    }
    return ok && wrong == 0 ? 0 : 1;
  });
}

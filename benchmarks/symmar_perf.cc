// symmar_perf: allreduce latency and bandwidth per message size, nccl-tests style.
//   mpirun -np N symmar_perf [flags]       one rank per process (per GPU, or CPU ranks)
//   symmar_perf --local-world N [flags]    N ranks as threads of this process (N ranks on one GPU)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "perf_runner.h"
#include "symmar/symmar.h"

#ifdef SYMMAR_PERF_WITH_MPI
#include <mpi.h>

#include "symmar/symmar_mpi.h"
#endif

namespace {

using perf::Options;
using perf::Result;

void usage() {
  printf(
      "usage: symmar_perf [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c 0|1] [-d dtype] [-o op]\n"
      "                   [-G 0|1] [-A algos] [-J file] [--device cpu|gpu|auto] [--local-world N] [--symmetric]\n"
      "  sizes take K/M/G suffixes; dtype: float half bfloat16 int32 double; op: sum max min\n"
      "  algos: comma list of auto,oneshot,twoshot,multimem,nccl,mpi, or all (everything available here)\n");
}

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1024.0;
  else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024;
  else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024;
  else if (*end != '\0') return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseArgs(int argc, char** argv, Options* o) {
  static const char* kTypes[] = {"float", "half", "bfloat16", "int32", "double"};
  static const char* kOps[] = {"sum", "max", "min"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") return false;
    if (a == "--symmetric") { o->symmetric = true; continue; }
    if (a == "--test-plant-wrong") { o->plant_wrong = true; continue; }
    if (!(v = next())) { fprintf(stderr, "missing value for %s\n", a.c_str()); return false; }
    if (a == "-b") { if (!parseBytes(v, &o->min_bytes)) return false; }
    else if (a == "-e") { if (!parseBytes(v, &o->max_bytes)) return false; }
    else if (a == "-f") o->factor = atof(v);
    else if (a == "-n") o->iters = atoi(v);
    else if (a == "-w") o->warmup = atoi(v);
    else if (a == "-c") o->check = atoi(v) != 0;
    else if (a == "-G") o->graph = atoi(v) != 0;
    else if (a == "-J") o->json = v;
    else if (a == "--device") o->device = v;
    else if (a == "--local-world") o->local_world = atoi(v);
    else if (a == "-d") {
      int found = -1;
      for (int t = 0; t < symmarNumTypes; ++t) if (!strcmp(v, kTypes[t])) found = t;
      if (found < 0) { fprintf(stderr, "unknown dtype %s\n", v); return false; }
      o->dtype = static_cast<symmarDataType_t>(found);
    } else if (a == "-o") {
      int found = -1;
      for (int t = 0; t < symmarNumOps; ++t) if (!strcmp(v, kOps[t])) found = t;
      if (found < 0) { fprintf(stderr, "unknown op %s\n", v); return false; }
      o->op = static_cast<symmarRedOp_t>(found);
    } else if (a == "-A") {
      o->algos.clear();
      o->all_algos = !strcmp(v, "all");
      std::string list = o->all_algos ? "auto" : v;
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        int found = -1;
        for (int t = 0; t < symmarNumAlgos; ++t) if (name == symmarAlgoName(static_cast<symmarAlgo_t>(t))) found = t;
        if (found < 0) { fprintf(stderr, "unknown algorithm %s\n", name.c_str()); return false; }
        o->algos.push_back(static_cast<symmarAlgo_t>(found));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else {
      fprintf(stderr, "unknown flag %s\n", a.c_str());
      return false;
    }
  }
  if (o->min_bytes > o->max_bytes || o->iters < 1 || o->warmup < 0 || o->factor < 1) {
    fprintf(stderr, "bad sweep: need -b <= -e, -n >= 1, -w >= 0, -f >= 1\n");
    return false;
  }
  if (o->device != "cpu" && o->device != "gpu" && o->device != "auto") return false;
  return true;
}

const char* typeName(symmarDataType_t t) {
  static const char* kNames[] = {"float", "half", "bfloat16", "int32", "double"};
  return kNames[t];
}
const char* opName(symmarRedOp_t o) {
  static const char* kNames[] = {"sum", "max", "min"};
  return kNames[o];
}

void printResults(const Options& opt, const std::vector<Result>& results) {
  symmarAlgo_t current = symmarNumAlgos;
  double bw_sum = 0;
  int bw_n = 0;
  auto footer = [&] {
    if (current != symmarNumAlgos && bw_n) printf("# Avg bus bandwidth (%s): %.3f GB/s\n#\n", symmarAlgoName(current), bw_sum / bw_n);
  };
  for (const Result& r : results) {
    if (r.algo != current) {
      footer();
      current = r.algo;
      bw_sum = 0;
      bw_n = 0;
      printf("# algorithm: %s\n", symmarAlgoName(r.algo));
      printf("# %12s %12s %8s %6s %11s %12s %12s %7s%s\n", "size", "count", "type", "redop", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "#wrong", r.algo == symmarAlgoAuto ? "  plan" : "");
    }
    printf("  %12zu %12zu %8s %6s %11.2f %12.3f %12.3f %7ld", r.bytes, r.count, typeName(opt.dtype), opName(opt.op),
           r.time_us, r.algbw_gbs, r.busbw_gbs, r.wrong);
    if (r.algo == symmarAlgoAuto) printf("  %s", symmarAlgoName(r.planned));
    printf("\n");
    bw_sum += r.busbw_gbs;
    ++bw_n;
  }
  footer();
}

void writeJson(const Options& opt, int world, bool gpu, const std::string& device, const std::vector<Result>& results) {
  std::ofstream out(opt.json);
  out << "{\"world\": " << world << ", \"backend\": \"" << (gpu ? "cuda" : "host") << "\", \"device\": \"" << device
      << "\", \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << (i ? ",\n  " : "\n  ") << "{\"algo\": \"" << symmarAlgoName(r.algo) << "\", \"bytes\": " << r.bytes
        << ", \"count\": " << r.count << ", \"dtype\": \"" << typeName(opt.dtype) << "\", \"time_us\": " << r.time_us
        << ", \"algbw_gbs\": " << r.algbw_gbs << ", \"busbw_gbs\": " << r.busbw_gbs << ", \"wrong\": " << r.wrong
        << ", \"plan\": \"" << symmarAlgoName(r.planned) << "\"}";
  }
  out << "\n]}\n";
}

// One rank: create the comm, run, and (rank 0) report. Returns the process exit status contribution.
int runRank(const Options& opt, perf::Group& group, symmarComm_t comm, int gpu_device, const char* launch) {
  std::vector<Result> results;
  std::string error;
  bool ok = runSweep(comm, group, opt, gpu_device, &results, &error);
  long wrong = 0;
  for (const Result& r : results) wrong += r.wrong;
  if (group.rank() == 0) {
    char desc[1024] = "";
    symmarCommDescribe(comm, desc, sizeof(desc));
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    printf("# symmar_perf: %d ranks (%s) on %s, %s %s, iters %d, warmup %d, check %d, graph %d\n", group.size(), launch,
           host, typeName(opt.dtype), opName(opt.op), opt.iters, opt.warmup, opt.check, opt.graph);
    printf("# %s\n#\n", desc);
    if (ok) printResults(opt, results);
    if (!ok) fprintf(stderr, "symmar_perf: %s\n", error.c_str());
    if (ok && !opt.json.empty()) writeJson(opt, group.size(), gpu_device >= 0, gpu_device >= 0 ? "gpu" : host, results);
    if (wrong) printf("# %ld wrong results\n", wrong);
    fflush(stdout);
  }
  return ok && wrong == 0 ? 0 : 1;
}

symmarConfig_t configFor(const Options& opt, int device) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = opt.device == "cpu" ? SYMMAR_DEVICE_CPU : (opt.device == "gpu" ? device : SYMMAR_DEVICE_AUTO);
  return cfg;
}

bool commUsesGpu(symmarComm_t comm) {
  symmarTopology_t t{};
  symmarCommTopology(comm, &t);
  return t.cc_major > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool under_mpi = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
#ifdef SYMMAR_PERF_WITH_MPI
  if (under_mpi) MPI_Init(&argc, &argv);
#endif
  if (!parseArgs(argc, argv, &opt)) {
    usage();
    return 2;
  }
  int status = 0;
  if (opt.local_world > 0) {
    const int n = opt.local_world;
    std::vector<symmarComm_t> comms(n);
    std::vector<int> devices(n, opt.device == "gpu" ? 0 : (opt.device == "cpu" ? SYMMAR_DEVICE_CPU : SYMMAR_DEVICE_AUTO));
    symmarConfig_t cfg = configFor(opt, 0);
    if (symmarCommInitAll(comms.data(), n, devices.data(), &cfg) != symmarSuccess) {
      fprintf(stderr, "symmar_perf: symmarCommInitAll: %s\n", symmarGetLastError(nullptr));
      return 1;
    }
    perf::ThreadShared shared(n);
    std::vector<int> rc(n, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto group = perf::makeThreadGroup(&shared, r, n);
        rc[r] = runRank(opt, *group, comms[r], commUsesGpu(comms[r]) ? 0 : -1, "threads of one process");
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      status |= rc[r];
      symmarCommDestroy(comms[r]);
    }
    return status;
  }
  symmarComm_t comm = nullptr;
#ifdef SYMMAR_PERF_WITH_MPI
  if (under_mpi) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    symmarConfig_t cfg = configFor(opt, local ? atoi(local) : rank);
    if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
      fprintf(stderr, "symmar_perf: symmarCommInitMpi: %s\n", symmarGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    auto group = perf::makeMpiGroup();
    status = runRank(opt, *group, comm, commUsesGpu(comm) ? cfg.device : -1, "MPI processes");
    int any = 0;
    MPI_Allreduce(&status, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    symmarCommDestroy(comm);
    MPI_Finalize();
    return any;
  }
#endif
  (void)under_mpi;
  symmarConfig_t cfg = configFor(opt, 0);
  if (symmarCommInitAll(&comm, 1, nullptr, &cfg) != symmarSuccess) {
    fprintf(stderr, "symmar_perf: %s\n", symmarGetLastError(nullptr));
    return 1;
  }
  auto group = perf::makeSingleGroup();
  status = runRank(opt, *group, comm, commUsesGpu(comm) ? 0 : -1, "one process");
  symmarCommDestroy(comm);
  return status;
}

#include "perf_cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/names.h"

#ifdef SYMMAR_PERF_WITH_MPI
#include <mpi.h>

#include "symmar/symmar_mpi.h"
#endif

namespace perf {
namespace {

// nccl-tests' dtype names: the output columns use them, so runs line up with nccl-tests' tables,
// and -d accepts them next to the library's own names.
const char* const kNcclTestsTypes[] = {"float", "half", "bfloat16", "int32", "double"};
static_assert(sizeof(kNcclTestsTypes) / sizeof(kNcclTestsTypes[0]) == symmarNumTypes, "a dtype lacks a name");

#ifdef SYMMAR_PERF_WITH_MPI
bool underMpi() { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK"); }
#endif

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

bool parseDtype(const char* v, symmarDataType_t* dtype) {
  if (symmar::parseDtypeName(v, dtype)) return true;
  for (int i = 0; i < symmarNumTypes; ++i) {
    if (!strcmp(kNcclTestsTypes[i], v)) {
      *dtype = static_cast<symmarDataType_t>(i);
      return true;
    }
  }
  return false;
}

/// A comma list of dtypes (each as parseDtype takes it); the first is the sweep's dtype.
bool parseDtypes(const char* v, Options* o) {
  std::vector<symmarDataType_t> list;
  std::string all(v);
  for (size_t at = 0; at <= all.size();) {
    const size_t comma = std::min(all.find(',', at), all.size());
    symmarDataType_t d;
    if (!parseDtype(all.substr(at, comma - at).c_str(), &d)) return false;
    if (std::find(list.begin(), list.end(), d) == list.end()) list.push_back(d);
    at = comma + 1;
  }
  o->dtypes = list;
  o->dtype = list.front();
  return true;
}

bool parseAlgos(const char* v, Options* o) {
  o->algos.clear();
  o->all_algos = !strcmp(v, "all");
  std::string list = o->all_algos ? "auto" : v;
  size_t pos = 0;
  for (;;) {
    size_t comma = list.find(',', pos);
    std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    symmarAlgo_t algo;
    if (!symmar::parseAlgoName(name.c_str(), &algo)) {
      fprintf(stderr, "unknown algorithm %s\n", name.c_str());
      return false;
    }
    o->algos.push_back(algo);
    if (comma == std::string::npos) return true;
    pos = comma + 1;
  }
}

bool commUsesGpu(symmarComm_t comm) {
  symmarTopology_t t{};
  symmarCommTopology(comm, &t);
  return t.cc_major > 0;
}

symmarConfig_t configFor(const Options& opt, int device) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = opt.device == "cpu" ? SYMMAR_DEVICE_CPU : (opt.device == "gpu" ? device : SYMMAR_DEVICE_AUTO);
  if (!opt.table_file.empty()) cfg.table_file = opt.table_file.c_str();
  return cfg;
}

int launchThreads(const Options& opt, const RankBody& body) {
  const int n = opt.local_world;
  std::vector<symmarComm_t> comms(n);
  symmarConfig_t cfg = configFor(opt, 0);
  std::vector<int> devices(n, cfg.device);  // several ranks on GPU 0 when --device gpu
  if (symmarCommInitAll(comms.data(), n, devices.data(), &cfg) != symmarSuccess) {
    fprintf(stderr, "symmarCommInitAll: %s\n", symmarGetLastError(nullptr));
    return 1;
  }
  ThreadShared shared(n);
  std::vector<int> rc(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto group = makeThreadGroup(&shared, r, n);
      rc[r] = body(*group, comms[r], commUsesGpu(comms[r]) ? 0 : -1, "threads of one process");
    });
  }
  int status = 0;
  for (int r = 0; r < n; ++r) {
    threads[r].join();
    status |= rc[r];
  }
  for (symmarComm_t c : comms) symmarCommDestroy(c);
  return status;
}

}  // namespace

const char* typeName(symmarDataType_t t) { return kNcclTestsTypes[t]; }

void startLauncher(int* argc, char*** argv) {
#ifdef SYMMAR_PERF_WITH_MPI
  if (underMpi()) MPI_Init(argc, argv);
#else
  (void)argc;
  (void)argv;
#endif
}

void printUsage(const char* prog, const char* extra_usage) {
  printf(
      "usage: %s [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c 0|1] [-d dtype[,dtype]] [-o op] [-G 0|1]\n"
      "          [-A algos] [-C collective] [-J file] [--device cpu|gpu|auto] [--local-world N] [--symmetric]\n"
      "          [--offset B] [--block N] [--hot] [--huge-pages] [--in-place]%s\n"
      "  collective: allreduce (default), reducescatter or allgather; sizes are the whole buffer (nranks\n"
      "  blocks), bus bandwidth as nccl-tests: x 2(n-1)/n for allreduce, x (n-1)/n for the others\n"
      "  sizes take K/M/G suffixes; dtype: float32 float16 bfloat16 int32 float64 (or nccl-tests' float half\n"
      "  double), or a comma list of them, timed interleaved as the algorithms are; op: sum max min\n"
      "  --block N: algorithms and dtypes take turns in runs of N calls (default 10), a run's first call\n"
      "  after another's untimed; 1: call by call\n"
      "  algos: comma list of auto,oneshot,twoshot,multimem,nccl,mpi, or all (everything available here)\n"
      "  launch: under mpirun one rank per process; --local-world N runs N ranks as threads\n"
      "  --offset B: host buffers start B bytes (< 4096) past a page; malloc'ed buffers sit at 16\n"
      "  --hot: each rank rewrites its host send buffer (untimed) before every call, so the call finds it\n"
      "  in this rank's cache, written, as an engine's layer leaves its output (default: as the last call left it)\n"
      "  --huge-pages: host buffers 2 MiB-aligned and advised into transparent huge pages (MADV_HUGEPAGE),\n"
      "  as torch's CPU allocator places large tensors under THP_MEM_ALLOC_ENABLE=1\n"
      "  --in-place: host calls reduce into their send buffer, as engines call (allreduce only; the input is\n"
      "  rewritten, untimed, before every call as with --hot)\n",
      prog, extra_usage);
}

bool parseArgs(int argc, char** argv, Options* o, const std::function<bool(const std::string&, const char*)>& extra) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return false;
    if (a == "--symmetric") {
      o->symmetric = true;
      continue;
    }
    if (a == "--hot") {
      o->hot = true;
      continue;
    }
    if (a == "--huge-pages") {
      o->huge_pages = true;
      continue;
    }
    if (a == "--in-place") {
      o->in_place = true;
      continue;
    }
    if (a == "--test-plant-wrong") {  // test switch: proves that a wrong result fails the run
      o->plant_wrong = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "missing value for %s\n", a.c_str());
      return false;
    }
    const char* v = argv[++i];
    bool ok = true;
    if (a == "-b") ok = parseBytes(v, &o->min_bytes);
    else if (a == "-e") ok = parseBytes(v, &o->max_bytes);
    else if (a == "-f") o->factor = atof(v);
    else if (a == "-n") o->iters = atoi(v);
    else if (a == "-w") o->warmup = atoi(v);
    else if (a == "--block")
      o->block = atoi(v);
    else if (a == "-c") o->check = atoi(v) != 0;
    else if (a == "-G") o->graph = atoi(v) != 0;
    else if (a == "-J") o->json = v;
    else if (a == "--device") o->device = v;
    else if (a == "--local-world") o->local_world = atoi(v);
    else if (a == "--offset") ok = parseBytes(v, &o->offset) && o->offset < 4096;
    else if (a == "-A") ok = parseAlgos(v, o);
    // addrmsnorm parses here for symmar_tune; symmar_perf refuses it (symmar_norm_perf times it).
    else if (a == "-C")
      ok = symmar::parseCollectiveName(v, &o->coll);
    else if (a == "-d") ok = parseDtypes(v, o);
    else if (a == "-o") ok = symmar::parseOpName(v, &o->op);
    else ok = extra && extra(a, v);
    if (!ok) {
      fprintf(stderr, "bad flag or value: %s %s\n", a.c_str(), v);
      return false;
    }
  }
  if (o->min_bytes > o->max_bytes || o->iters < 1 || o->warmup < 0 || o->factor < 1 || o->local_world < 0 ||
      o->block < 1) {
    fprintf(stderr, "bad sweep: need -b <= -e, -n >= 1, -w >= 0, -f >= 1, --block >= 1\n");
    return false;
  }
  if (o->in_place && o->coll != symmar::Collective::kAllReduce) {  // (a GPU comm refuses it in runSweep)
    fprintf(stderr, "--in-place: allreduce only\n");
    return false;
  }
  if (o->device != "cpu" && o->device != "gpu" && o->device != "auto") {
    fprintf(stderr, "--device must be cpu, gpu or auto\n");
    return false;
  }
  return true;
}

int launch(const Options& opt, const RankBody& body) {
  if (opt.local_world > 0) return launchThreads(opt, body);
  symmarComm_t comm = nullptr;
#ifdef SYMMAR_PERF_WITH_MPI
  if (underMpi()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    symmarConfig_t cfg = configFor(opt, local ? atoi(local) : rank);
    int status = 0;
    if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
      fprintf(stderr, "symmarCommInitMpi: %s\n", symmarGetLastError(nullptr));
      status = 1;
    } else {
      auto group = makeMpiGroup();
      status = body(*group, comm, commUsesGpu(comm) ? cfg.device : -1, "MPI processes");
      symmarCommDestroy(comm);
    }
    int any = 0;
    MPI_Allreduce(&status, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
  }
#endif
  symmarConfig_t cfg = configFor(opt, 0);
  if (symmarCommInitAll(&comm, 1, nullptr, &cfg) != symmarSuccess) {
    fprintf(stderr, "symmarCommInitAll: %s\n", symmarGetLastError(nullptr));
    return 1;
  }
  auto group = makeSingleGroup();
  int status = body(*group, comm, commUsesGpu(comm) ? 0 : -1, "one process");
  symmarCommDestroy(comm);
  return status;
}

}  // namespace perf

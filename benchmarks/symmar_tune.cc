// symmar_tune: measures every algorithm available on this machine across sizes and writes a table
// file whose thresholds reproduce the measured crossovers. Same launch forms as symmar_perf; -C
// tunes the row of a reduce-scatter or all-gather (sizes: the whole buffer), or with -C addrmsnorm
// the fused allreduce + residual add + RMSNorm's row: each fused form against the unfused path at
// --tokens counts of --hidden elements (the crossover past which the planner runs them unfused).
//   mpirun -np 4 symmar_tune --out sm120-pcie-4.json -b 4K -e 64M
//   mpirun -np 4 symmar_tune -C allgather --out sm120-pcie-4-allgather.json
//   mpirun -np 8 symmar_tune -C addrmsnorm --hidden 7168 --out sm90-nvswitch-8-fused.json
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/names.h"
#include "perf_cli.h"
#include "perf_fused.h"
#include "plan/table.h"
#include "tune_table.h"

namespace {

bool parseTokens(const char* v, std::vector<size_t>* tokens) {
  tokens->clear();
  for (const char* p = v; *p;) {
    char* end = nullptr;
    const unsigned long long t = strtoull(p, &end, 10);
    if (end == p || t == 0) return false;
    tokens->push_back(t);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return false;
  }
  return !tokens->empty();
}

/// The fused sweep's comm reads its rows from a file of its own (unfusedTableJson); "" on failure.
std::string writeUnfusedTable() {
  char path[] = "/tmp/symmar-tune-unfused-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  const std::string json = tune::unfusedTableJson();
  const bool ok = write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
  close(fd);
  return ok ? path : "";
}

/// Writes the row measured on comm to out, keyed as the planner looks it up (Tables::resolve): host
/// ranks share one arch; a comm spanning hosts is keyed by its ranks per host and its hosts.
int writeRow(symmarComm_t comm, int world, const std::vector<tune::Entry>& entries, const char* collective,
             const perf::Options& opt, double margin, const std::string& out) {
  symmarTopology_t topo{};
  symmarCommTopology(comm, &topo);
  char host[128] = "";
  gethostname(host, sizeof(host) - 1);
  char date[32];
  time_t now = time(nullptr);
  strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
  const std::string source = std::string("symmar_tune on ") + host + " " + date + ", " + collective + ", " +
                             perf::typeName(opt.dtype) + ", margin " + std::to_string(margin);
  const int arch =
      topo.link == symmarLinkHostMemory ? symmar::kArchHost : symmar::archOf(topo.cc_major, topo.cc_minor);
  int hosts = 1, per_host = world;
  symmarCommHostLayout(comm, &hosts, nullptr, nullptr, &per_host);
  std::ofstream file(out);
  file << tune::tableFileJson(symmar::archKeyName(arch), symmar::linkName(topo.link), hosts > 1 ? per_host : world,
                              entries, source, hosts, collective);
  if (!file.flush()) {
    fprintf(stderr, "symmar_tune: could not write %s\n", out.c_str());
    return 1;
  }
  printf("symmar_tune: wrote %s:", out.c_str());
  for (const auto& e : entries) printf(" %s<=%llu", symmarAlgoName(e.algo), static_cast<unsigned long long>(e.max_bytes));
  printf("\n");
  return 0;
}

/// -C addrmsnorm: the fused forms against the unfused path, then the row (tuneFusedRow).
int tuneFused(perf::Group& group, symmarComm_t comm, int gpu_device, const perf::Options& opt,
              const perf::FusedSweep& sweep, double margin, const std::string& out) {
  int hosts = 1, per_host = group.size();
  symmarCommHostLayout(comm, &hosts, nullptr, nullptr, &per_host);
  if (hosts > 1) {  // the fused call runs on one host's ranks; its rows have no hosts key
    if (group.rank() == 0) fprintf(stderr, "symmar_tune: -C addrmsnorm measures the ranks of one host\n");
    return 2;
  }
  std::vector<tune::FusedMeasurement> m;
  std::string error;
  if (!perf::runFusedSweep(comm, group, opt, sweep, gpu_device, &m, &error)) {
    if (group.rank() == 0) fprintf(stderr, "symmar_tune: %s\n", error.c_str());
    return 1;
  }
  if (group.rank() != 0) return 0;
  printf("# fused allreduce + residual add + RMSNorm, hidden %zu, %s, %d ranks: median us of the slowest rank "
         "(0: the form does not serve that size)\n",
         sweep.hidden, perf::typeName(opt.dtype), group.size());
  printf("#%9s %12s %10s %10s %10s %10s\n", "tokens", "bytes", "unfused", "oneshot", "twoshot", "lamport");
  for (const tune::FusedMeasurement& f : m) {
    printf("%10zu %12zu %10.2f %10.2f %10.2f %10.2f\n", f.bytes / (sweep.hidden * symmarTypeSize(opt.dtype)), f.bytes,
           f.unfused_us, f.oneshot_us, f.twoshot_us, f.lamport_us);
  }
  return writeRow(comm, group.size(), tune::tuneFusedRow(m, margin), "addrmsnorm", opt, margin, out);
}

}  // namespace

int main(int argc, char** argv) {
  // Ranks that share a GPU (or a process driving several) need their kernels resident at once: more
  // hardware queues than the default 8 keep their streams from serialising. Read at context
  // creation, so set before the first CUDA call; a user's own value wins.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  perf::startLauncher(&argc, &argv);
  perf::Options opt;
  opt.min_bytes = 1024;
  opt.dtype = symmarBfloat16;
  opt.check = true;
  std::string out = "symmar-table.json";
  double margin = 0.05;
  perf::FusedSweep sweep;
  bool sweep_flags = false;  // --hidden / --tokens: only with -C addrmsnorm
  auto extra = [&](const std::string& flag, const char* v) {
    if (flag == "--out") out = v;
    else if (flag == "--margin") margin = atof(v);
    else if (flag == "--hidden") return sweep_flags = true, (sweep.hidden = strtoull(v, nullptr, 10)) > 0;
    else if (flag == "--tokens") return sweep_flags = true, parseTokens(v, &sweep.tokens);
    else return false;
    return true;
  };
  const bool parsed = perf::parseArgs(argc, argv, &opt, extra);
  const bool fused = opt.coll == symmar::Collective::kAddRmsNorm;
  if (!parsed || margin < 0 || opt.dtypes.size() > 1 || (sweep_flags && !fused) ||
      (fused && opt.dtype != symmarFloat32 && opt.dtype != symmarFloat16 && opt.dtype != symmarBfloat16)) {
    perf::printUsage(argv[0], " [--out FILE] [--margin 0.05] [-C addrmsnorm [--hidden 7168] [--tokens 1,2,4,...]]");
    return 2;
  }
  opt.all_algos = true;
  if (fused) {
    opt.table_file = writeUnfusedTable();
    if (opt.table_file.empty()) {
      fprintf(stderr, "symmar_tune: could not write a table file under /tmp\n");
      return 1;
    }
  }
  const int status = perf::launch(opt, [&](perf::Group& group, symmarComm_t comm, int gpu_device, const char*) {
    if (fused) return tuneFused(group, comm, gpu_device, opt, sweep, margin, out);
    std::vector<perf::Result> results;
    std::string error;
    if (!perf::runSweep(comm, group, opt, gpu_device, &results, &error)) {
      if (group.rank() == 0) fprintf(stderr, "symmar_tune: %s\n", error.c_str());
      return 1;
    }
    if (group.rank() != 0) return 0;
    std::vector<tune::Measurement> m;
    for (const perf::Result& r : results) {
      if (r.wrong) {
        fprintf(stderr, "symmar_tune: %s gave wrong results at %zu bytes\n", symmarAlgoName(r.algo), r.bytes);
        return 1;
      }
      m.push_back({r.algo, r.bytes, r.time_us});
    }
    return writeRow(comm, group.size(), tune::tuneRow(m, margin), symmar::collectiveName(opt.coll), opt, margin, out);
  });
  if (fused) unlink(opt.table_file.c_str());
  return status;
}

// symmar_tune: measures every algorithm available on this machine across sizes and writes a table
// file whose thresholds reproduce the measured crossovers. Same launch forms as symmar_perf; -C
// tunes the row of a reduce-scatter or all-gather (sizes: the whole buffer).
//   mpirun -np 4 symmar_tune --out sm120-pcie-4.json -b 4K -e 64M
//   mpirun -np 4 symmar_tune -C allgather --out sm120-pcie-4-allgather.json
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/names.h"
#include "perf_cli.h"
#include "plan/table.h"
#include "tune_table.h"

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
  auto extra = [&](const std::string& flag, const char* v) {
    if (flag == "--out") out = v;
    else if (flag == "--margin") margin = atof(v);
    else return false;
    return true;
  };
  if (!perf::parseArgs(argc, argv, &opt, extra) || margin < 0 || opt.dtypes.size() > 1) {
    perf::printUsage(argv[0], " [--out FILE] [--margin 0.05]");
    return 2;
  }
  opt.all_algos = true;
  return perf::launch(opt, [&](perf::Group& group, symmarComm_t comm, int gpu_device, const char*) {
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
    symmarTopology_t topo{};
    symmarCommTopology(comm, &topo);
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    char date[32];
    time_t now = time(nullptr);
    strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
    std::string source = std::string("symmar_tune on ") + host + " " + date + ", " +
                         symmar::collectiveName(opt.coll) + ", " + perf::typeName(opt.dtype) + ", margin " +
                         std::to_string(margin);
    auto entries = tune::tuneRow(m, margin);
    // The row key the planner looks up for this comm (Tables::resolve): host ranks share one arch;
    // a comm spanning hosts is keyed by its ranks per host and its number of hosts.
    const int arch =
        topo.link == symmarLinkHostMemory ? symmar::kArchHost : symmar::archOf(topo.cc_major, topo.cc_minor);
    int hosts = 1, per_host = group.size();
    symmarCommHostLayout(comm, &hosts, nullptr, nullptr, &per_host);
    std::ofstream(out) << tune::tableFileJson(symmar::archKeyName(arch), symmar::linkName(topo.link),
                                              hosts > 1 ? per_host : group.size(), entries, source, hosts,
                                              symmar::collectiveName(opt.coll));
    printf("symmar_tune: wrote %s:", out.c_str());
    for (const auto& e : entries) printf(" %s<=%llu", symmarAlgoName(e.algo), static_cast<unsigned long long>(e.max_bytes));
    printf("\n");
    return 0;
  });
}

// moe_decode's memory check: what a configuration needs against what this machine (and this
// process's address-space limit) has, before anything large is allocated.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "moe_run.h"

namespace moe {
namespace {

/// A "Key:   123 kB" line of a /proc file, in bytes; 0 when absent.
size_t procKiB(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  const std::string want = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, want.size(), want) == 0) return std::stoull(line.substr(want.size())) * 1024;
  }
  return 0;
}

std::string gib(double bytes) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

std::string tooBig(const Args& args, size_t per_rank, int ranks, size_t available, const char* where) {
  const size_t need = per_rank * static_cast<size_t>(ranks);
  // 10% and 256 MiB of headroom: the library's heap, the allocator's slack, the rest of the system.
  if (need + need / 10 + (256u << 20) <= available) return "";
  return "moe_decode: preset " + args.preset.name + " with " + std::to_string(args.preset.experts) +
         " experts needs about " + gib(static_cast<double>(per_rank)) + " per rank, " +
         gib(static_cast<double>(need)) + " for " + std::to_string(ranks) + " rank(s) on " + where + ", but " +
         gib(static_cast<double>(available)) +
         " is available: lower --experts (the expert weights are most of it; --layers share one set of "
         "layer weights, so lowering --layers does not help) or run fewer ranks here";
}

std::string hostMemoryRefusal(const Args& args, int world, int ranks_in_process, size_t per_rank) {
  // Every rank of an intra-node group lives on this machine.
  const size_t avail = procKiB("/proc/meminfo", "MemAvailable");
  std::string why = avail ? tooBig(args, per_rank, world, avail, "this machine (MemAvailable)") : "";
  if (!why.empty()) return why;
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const size_t used = procKiB("/proc/self/status", "VmSize");
    const size_t left = as.rlim_cur > used ? as.rlim_cur - used : 0;
    why = tooBig(args, per_rank, ranks_in_process, left, "this process (its address-space limit, ulimit -v)");
  }
  return why;
}

}  // namespace moe

// symmar_coherence_probe: what handing data from one core to another costs on this machine, and
// how that cost moves over time. Every shared-memory collective (the host backend's staged forms,
// lamport, and any other library's) is made of two steps, timed here apart:
//  - the writer stores a buffer whose lines the other core has just read: each store must first
//    take those lines away from the reader's cache;
//  - the reader copies a buffer whose lines the other core has just written.
// Two threads pinned to two CPUs take turns through one buffer, `handoffs` times per round; each
// round prints its mean times, and the summary their spread. Two cores of one shared cache hand
// lines over fast; cores apart (another die, or virtual CPUs the hypervisor moves) can take far
// longer, and a virtual machine can move between the two states from second to second.
//
//   symmar_coherence_probe [--bytes 256K] [--rounds 40] [--handoffs 100] [--cpus 0,1] [--quiet]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double microsNow() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

struct Options {
  size_t bytes = 256 << 10;
  int rounds = 40, handoffs = 100, cpus[2] = {-1, -1};
  bool quiet = false;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quiet") {
      o->quiet = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--bytes") {
      o->bytes = std::strtoull(v, &end, 10);
      if (*end == 'K' || *end == 'k') o->bytes <<= 10;
      if (*end == 'M' || *end == 'm') o->bytes <<= 20;
    } else if (a == "--rounds") {
      o->rounds = std::atoi(v);
    } else if (a == "--handoffs") {
      o->handoffs = std::atoi(v);
    } else if (a == "--cpus" && std::sscanf(v, "%d,%d", &o->cpus[0], &o->cpus[1]) == 2) {
    } else {
      return false;
    }
  }
  return o->bytes >= 64 && o->rounds > 0 && o->handoffs > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--bytes 256K] [--rounds 40] [--handoffs 100] [--cpus A,B] [--quiet]\n", argv[0]);
    return 2;
  }
  if (o.cpus[0] < 0) {  // the first two CPUs this process may run on
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c) {
      if (CPU_ISSET(c, &set)) o.cpus[k++] = c;
    }
    if (o.cpus[1] < 0) {
      fprintf(stderr, "this process may run on one CPU only: nothing to hand over\n");
      return 77;  // (the exit code test runners read as "skipped")
    }
  }
  std::vector<char> shared(o.bytes), source(o.bytes, 3), sink(o.bytes);
  alignas(64) std::atomic<unsigned> written{0};
  alignas(64) std::atomic<unsigned> read{0};
  std::vector<double> write_us(static_cast<size_t>(o.rounds)), read_us(static_cast<size_t>(o.rounds));
  printf("# symmar_coherence_probe: %zu bytes, CPUs %d (writer) and %d (reader), %d rounds of %d handoffs\n", o.bytes,
         o.cpus[0], o.cpus[1], o.rounds, o.handoffs);
  if (!o.quiet) printf("# %5s %14s %14s\n", "round", "writer us", "reader us");
  std::thread writer([&] {
    pinTo(o.cpus[0]);
    unsigned seq = 0;
    for (int r = 0; r < o.rounds; ++r) {
      double total = 0;
      for (int h = 0; h < o.handoffs; ++h) {
        while (read.load(std::memory_order_acquire) != seq) {
        }
        const double t0 = microsNow();
        std::memcpy(shared.data(), source.data(), o.bytes);
        total += microsNow() - t0;
        written.store(++seq, std::memory_order_release);
      }
      write_us[static_cast<size_t>(r)] = total / o.handoffs;
    }
  });
  if (!pinTo(o.cpus[1])) fprintf(stderr, "could not pin the reader to CPU %d\n", o.cpus[1]);
  unsigned seq = 0;
  for (int r = 0; r < o.rounds; ++r) {
    double total = 0;
    for (int h = 0; h < o.handoffs; ++h) {
      while (written.load(std::memory_order_acquire) != seq + 1) {
      }
      const double t0 = microsNow();
      std::memcpy(sink.data(), shared.data(), o.bytes);
      total += microsNow() - t0;
      read.store(++seq, std::memory_order_release);
    }
    read_us[static_cast<size_t>(r)] = total / o.handoffs;
    // The writer stored its mean for round r - 1 before this round's first handoff, acquired above.
    if (!o.quiet && r > 0) printf("  %5d %14.1f %14.1f\n", r - 1, write_us[static_cast<size_t>(r - 1)], read_us[static_cast<size_t>(r - 1)]);
  }
  writer.join();
  if (!o.quiet) printf("  %5d %14.1f %14.1f\n", o.rounds - 1, write_us.back(), read_us.back());
  const double gb = static_cast<double>(o.bytes) / 1e3;  // bytes per us -> GB/s
  printf("# %-7s %10s %10s %10s   (us per %zu bytes, over rounds)\n", "", "p10", "median", "p90", o.bytes);
  for (int side = 0; side < 2; ++side) {
    const std::vector<double>& v = side == 0 ? write_us : read_us;
    printf("  %-7s %10.1f %10.1f %10.1f   median %.1f GB/s\n", side == 0 ? "writer" : "reader", percentile(v, 0.1),
           percentile(v, 0.5), percentile(v, 0.9), gb / percentile(v, 0.5));
  }
  return 0;
}

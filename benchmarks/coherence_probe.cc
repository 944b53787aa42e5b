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
// --writer stream / --reader stream: the writer's stores or the reader's loads non-temporal
// (x86 with AVX2: vmovntdq, vmovntdqa), as vLLM's CPU allreduce stages and reads.
//
//   symmar_coherence_probe [--bytes 256K] [--rounds 40] [--handoffs 100] [--cpus 0,1] [--quiet]
//                          [--writer plain|stream] [--reader plain|stream]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

#if defined(__x86_64__)
// 32-byte aligned dst and src, bytes a multiple of 128.
__attribute__((target("avx2"))) void copyStreamingStores(char* dst, const char* src, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
  _mm_sfence();
}
__attribute__((target("avx2"))) void copyStreamingLoads(char* dst, const char* src, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 32) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i),
                       _mm256_stream_load_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
}
bool canStream() { return __builtin_cpu_supports("avx2"); }
#else
void copyStreamingStores(char* dst, const char* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void copyStreamingLoads(char* dst, const char* src, size_t bytes) { std::memcpy(dst, src, bytes); }
bool canStream() { return false; }
#endif

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
  bool stream_writes = false, stream_reads = false;
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
    } else if (a == "--writer" && (std::strcmp(v, "plain") == 0 || std::strcmp(v, "stream") == 0)) {
      o->stream_writes = std::strcmp(v, "stream") == 0;
    } else if (a == "--reader" && (std::strcmp(v, "plain") == 0 || std::strcmp(v, "stream") == 0)) {
      o->stream_reads = std::strcmp(v, "stream") == 0;
    } else if (a == "--cpus" && std::sscanf(v, "%d,%d", &o->cpus[0], &o->cpus[1]) == 2) {
    } else {
      return false;
    }
  }
  return o->bytes >= 128 && o->bytes % 128 == 0 && o->rounds > 0 && o->handoffs > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--bytes 256K] [--rounds 40] [--handoffs 100] [--cpus A,B] [--quiet] [--writer plain|stream] "
            "[--reader plain|stream]\n(bytes: a multiple of 128)\n", argv[0]);
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
  if ((o.stream_writes || o.stream_reads) && !canStream()) {
    fprintf(stderr, "streaming stores and loads need an x86 CPU with AVX2\n");
    return 77;
  }
  // 64-byte aligned buffers (the streaming forms need 32).
  struct Freed {
    void operator()(char* p) const { std::free(p); }
  };
  const auto buffer = [&](int fill) {
    std::unique_ptr<char, Freed> p(static_cast<char*>(std::aligned_alloc(64, o.bytes)));
    std::memset(p.get(), fill, o.bytes);
    return p;
  };
  const auto shared = buffer(0), source = buffer(3), sink = buffer(0);
  const auto write = o.stream_writes ? copyStreamingStores : [](char* d, const char* s, size_t n) { std::memcpy(d, s, n); };
  const auto read = o.stream_reads ? copyStreamingLoads : [](char* d, const char* s, size_t n) { std::memcpy(d, s, n); };
  alignas(64) std::atomic<unsigned> written{0};
  alignas(64) std::atomic<unsigned> done{0};
  std::vector<double> write_us(static_cast<size_t>(o.rounds)), read_us(static_cast<size_t>(o.rounds));
  printf("# symmar_coherence_probe: %zu bytes, CPUs %d (writer, %s stores) and %d (reader, %s loads), %d rounds of %d "
         "handoffs\n", o.bytes, o.cpus[0], o.stream_writes ? "streaming" : "plain", o.cpus[1],
         o.stream_reads ? "streaming" : "plain", o.rounds, o.handoffs);
  if (!o.quiet) printf("# %5s %14s %14s\n", "round", "writer us", "reader us");
  std::thread writer([&] {
    pinTo(o.cpus[0]);
    unsigned seq = 0;
    for (int r = 0; r < o.rounds; ++r) {
      double total = 0;
      for (int h = 0; h < o.handoffs; ++h) {
        while (done.load(std::memory_order_acquire) != seq) {
        }
        const double t0 = microsNow();
        write(shared.get(), source.get(), o.bytes);
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
      read(sink.get(), shared.get(), o.bytes);
      total += microsNow() - t0;
      done.store(++seq, std::memory_order_release);
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

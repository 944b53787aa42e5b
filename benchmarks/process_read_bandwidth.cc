// symmar_process_read_bandwidth: how fast one process copies another's memory with
// process_vm_readv (Linux cross-memory attach), which the host all-gather's peers use to read a
// caller's send buffer, for a source in 4 KiB pages and in transparent huge pages, beside memcpy
// within one process. The kernel pins every page of the source before it copies, so the page size
// of the source can matter more than the copy.
//
// A forked child allocates the two sources (2 MiB-aligned, one advised MADV_HUGEPAGE before its first
// write) and waits; the parent reads each into its own buffer, in rounds, and prints the median GB/s
// of each size and round. It exits 77 where process_vm_readv is refused or missing (a sandbox, qemu-user).
//
//   symmar_process_read_bandwidth [--min 256K] [--max 64M] [--rounds 3]
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  const double v = strtod(s, &end);
  if (end == s || v <= 0) return false;
  const std::string unit(end);
  const double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : 0;
  if (scale == 0) return false;
  *out = static_cast<size_t>(v * scale);
  return true;
}

/// 2 MiB-aligned, written once; huge: advised into transparent huge pages before that write.
char* allocateWritten(size_t bytes, bool huge) {
  const size_t span = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  char* p = static_cast<char*>(aligned_alloc(kHugePage, span));
  if (!p) return nullptr;
  if (huge) (void)madvise(p, span, MADV_HUGEPAGE);  // advice: the kernel may still give 4 KiB pages
  memset(p, 1, span);
  return p;
}

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The kilobytes of pid's memory in transparent huge pages (smaps_rollup), or -1 where unreadable.
long anonHugeKiB(pid_t pid) {
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/smaps_rollup").c_str(), "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median GB/s of reading bytes from the child's src into dst; negative with errno set on failure.
double readBandwidth(pid_t child, const char* src, char* dst, size_t bytes) {
  std::vector<double> t;
  const int reps = static_cast<int>(std::max<size_t>(5, (size_t(256) << 20) / bytes));
  for (int r = 0; r < reps; ++r) {
    iovec local{dst, bytes};
    iovec remote{const_cast<char*>(src), bytes};
    const auto t0 = std::chrono::steady_clock::now();
    const ssize_t got = process_vm_readv(child, &local, 1, &remote, 1, 0);
    const auto t1 = std::chrono::steady_clock::now();
    if (got != static_cast<ssize_t>(bytes)) return -1;
    t.push_back(seconds(t0, t1));
  }
  return bytes / median(t) / 1e9;
}

double memcpyBandwidth(char* dst, const char* src, size_t bytes) {
  std::vector<double> t;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    memcpy(dst, src, bytes);
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(seconds(t0, t1));
  }
  return bytes / median(t) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  size_t min_bytes = 256 << 10, max_bytes = 64 << 20;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    bool ok = has_value;
    if (a == "--min" && has_value) ok = parseBytes(argv[++i], &min_bytes);
    else if (a == "--max" && has_value) ok = parseBytes(argv[++i], &max_bytes);
    else if (a == "--rounds" && has_value) ok = (rounds = atoi(argv[++i])) > 0;
    else ok = false;
    if (!ok) {
      fprintf(stderr, "usage: %s [--min 256K] [--max 64M] [--rounds 3]\n", argv[0]);
      return 2;
    }
  }
  if (min_bytes > max_bytes) std::swap(min_bytes, max_bytes);

  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {  // holds the sources until the parent is done reading them
    char* sources[2] = {allocateWritten(max_bytes, false), allocateWritten(max_bytes, true)};
    if (write(to_parent[1], sources, sizeof sources) != sizeof sources) _exit(1);
    char done;
    (void)!read(to_child[0], &done, 1);
    _exit(0);
  }
  char* sources[2] = {nullptr, nullptr};
  const bool got_sources = read(to_parent[0], sources, sizeof sources) == sizeof sources && sources[0] && sources[1];
  char* dst = allocateWritten(max_bytes, false);
  char* local_src = allocateWritten(max_bytes, false);
  int status = got_sources && dst && local_src ? 0 : 1;

  printf("# process_vm_readv from a forked child, median GB/s; THP: ");
  FILE* thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char setting[128] = "unknown";
  if (thp && fgets(setting, sizeof setting, thp)) setting[strcspn(setting, "\n")] = 0;
  if (thp) fclose(thp);
  printf("%s; the child's memory in huge pages: %ld KiB\n# %10s %6s %14s %14s %10s\n", setting, anonHugeKiB(child), "bytes", "round", "4 KiB pages", "huge pages", "memcpy");
  for (size_t bytes = min_bytes; status == 0 && bytes <= max_bytes; bytes *= 4) {
    for (int round = 0; round < rounds && status == 0; ++round) {
      const double small = readBandwidth(child, sources[0], dst, bytes);
      const double huge = readBandwidth(child, sources[1], dst, bytes);
      if (small < 0 || huge < 0) {
        const bool refused = errno == EPERM || errno == ENOSYS;
        fprintf(stderr, "process_vm_readv: %s%s\n", strerror(errno), refused ? " (skipped: not permitted here)" : "");
        status = refused ? 77 : 1;
        break;
      }
      printf("  %10zu %6d %14.2f %14.2f %10.2f\n", bytes, round, small, huge, memcpyBandwidth(dst, local_src, bytes));
    }
  }
  (void)!write(to_child[1], "x", 1);
  waitpid(child, nullptr, 0);
  free(dst);
  free(local_src);
  return status;
}

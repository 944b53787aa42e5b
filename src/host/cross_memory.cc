#include "host/cross_memory.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef PR_SET_PTRACER  // older headers: Linux's values
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY (static_cast<unsigned long>(-1))
#endif

namespace symmar {

int yamaPtraceScope(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  int scope = -1;
  if (std::fscanf(f, "%d", &scope) != 1 || scope < 0 || scope > 3) scope = -1;
  std::fclose(f);
  return scope;
}

PeerReadPermission letPeersRead(int scope, int (*set_ptracer_any)()) {
  if (scope != 1) return scope <= 0 ? PeerReadPermission::kNotNeeded : PeerReadPermission::kNotGrantable;
  return set_ptracer_any() == 0 ? PeerReadPermission::kGranted : PeerReadPermission::kRefused;
}

int setPtracerAny() { return prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); }

bool crossMemoryRead(int pid, void* dst, uint64_t remote, size_t bytes) {
  char* out = static_cast<char*>(dst);
  while (bytes > 0) {  // a read stops short at an unmapped page (or, in principle, anywhere)
    struct iovec local = {out, bytes};
    struct iovec from = {reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
    const ssize_t got = process_vm_readv(pid, &local, 1, &from, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EFAULT;
      return false;
    }
    out += got, remote += static_cast<uint64_t>(got), bytes -= static_cast<size_t>(got);
  }
  return true;
}

bool crossMemoryWorks(const ShmHeap& heap, int rank, int world, std::vector<int>* pids) {
  pids->assign(static_cast<size_t>(world), 0);
  (*pids)[static_cast<size_t>(rank)] = getpid();
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    const SegmentHeader* mapped = heap.header(p);
    const int pid = mapped->pid;
    const uint64_t address = mapped->self_address;
    SegmentHeader read;
    if (address == 0 || !crossMemoryRead(pid, &read, address, sizeof(read))) return false;
    // Another process with the same pid (another pid namespace) shows another header.
    if (read.pid != pid || read.self_address != address) return false;
    (*pids)[static_cast<size_t>(p)] = pid;
  }
  return true;
}

}  // namespace symmar

#include "host/cross_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace symmar {

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

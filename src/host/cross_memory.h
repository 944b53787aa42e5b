// Reading a peer process's memory in place (Linux cross-memory attach, process_vm_readv): one copy
// from the peer's own buffer, where staging costs a copy in, by the peer, and one out. The copy in
// writes lines the readers held from the call before, and each write waits for their copies to be
// dropped: on the 2-rank EPYC VM of docs/performance/host-scatter-gather.md that made a staged all-gather 3-7x slower
// in its slow state, where reads from a peer's process kept their speed.
//
// A rank publishes the address of its send buffer, tagged, where it would publish a symmetric
// input's heap offset (with the barrier flag); readers then copy from it with process_vm_readv.
// The kernel checks each read against the peer's address space and permissions, so a wrong
// address from a broken peer fails the read (the call fails on every rank), never this process.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/schedule.h"
#include "host/shm_heap.h"

namespace symmar {

/// The tag of a published send-buffer address: user-space addresses (x86-64, arm64) lie below
/// 2^63, heap offsets far below, and kStagedInput (all ones) is no user address.
constexpr uint64_t kCrossMemoryTag = uint64_t{1} << 63;

/// What a rank publishes for a send buffer at p: its tagged address, or kStagedInput for an
/// address the tag cannot carry.
inline uint64_t crossMemoryWord(const void* p) {
  const uint64_t a = reinterpret_cast<uintptr_t>(p);
  return (a & kCrossMemoryTag) ? sched::kStagedInput : (a | kCrossMemoryTag);
}
/// Whether a published input word is a tagged address (else a heap offset or kStagedInput).
inline bool isCrossMemoryWord(uint64_t word) { return word != sched::kStagedInput && (word & kCrossMemoryTag); }
/// The address a tagged word carries.
inline uint64_t crossMemoryAddress(uint64_t word) { return word & ~kCrossMemoryTag; }

/// Yama's ptrace_scope as the file at `path` gives it (0-3), or -1 where there is no such file
/// (no Yama: only the same-user rule applies) or it holds something else.
int yamaPtraceScope(const char* path = "/proc/sys/kernel/yama/ptrace_scope");

/// What letPeersRead found to do.
enum class PeerReadPermission {
  kNotNeeded,    ///< no Yama, or scope 0: a process of the same user may read this one already
  kGranted,      ///< scope 1: every process of this user may now read this one
  kRefused,      ///< scope 1, and the prctl call failed
  kNotGrantable  ///< scope 2 or 3: reads need a capability no process can hand out
};

/// Under Yama's ptrace_scope 1 (Ubuntu's default) a process may read only its own descendants,
/// unless the process read names its reader: each rank names any process of its user
/// (prctl PR_SET_PTRACER_ANY, as Open MPI's cross-memory transport does), so that peers that are
/// not its descendants can read its send buffers. The permission stays for the process's life:
/// Yama keeps one such name per process, and narrowing it again could break another comm's reads
/// or another library's. `set_ptracer_any` makes the call (tests pass their own); 0 on success.
PeerReadPermission letPeersRead(int scope, int (*set_ptracer_any)());

/// The prctl call letPeersRead makes in a library build.
int setPtracerAny();

/// Copies bytes from address `remote` in process pid to dst. False on a failed or short read
/// (errno says why: ESRCH the process is gone, EFAULT the address is not mapped there, EPERM).
bool crossMemoryRead(int pid, void* dst, uint64_t remote, size_t bytes);

/// Whether this rank reads every peer's segment header from the peer's process and finds what
/// the shared mapping shows: permission (Yama ptrace_scope, seccomp, capabilities) and the pids
/// (one pid namespace) both work. Peers' headers name their own addresses (ShmHeap::create).
/// pids[p] gets the pid read for peer p (pids[rank]: this process's): the process every later
/// read goes to, so that a header rewritten after this check cannot redirect a read.
bool crossMemoryWorks(const ShmHeap& heap, int rank, int world, std::vector<int>* pids);

}  // namespace symmar

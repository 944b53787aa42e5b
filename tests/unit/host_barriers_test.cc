// How many barriers the host schedules take per call, counted on the barrier epoch: each barrier is
// a cache-line round trip between the ranks, the largest cost of a small call. Reduce-scatter and
// all-gather take one per chunk, and one more at the end only when a peer's send buffer was read
// in place (a symmarMemAlloc buffer, or an all-gather's send buffer read from the peer's process),
// so that no rank returns while a peer still reads its input. Their lamport forms take none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "api/comm.h"
#include "host/cross_memory.h"
#include "host/host_backend.h"
#include "symmar/symmar.h"

namespace {

struct Counted {
  bool ok = true;
  uint32_t barriers = 0;
  bool reads_processes = false;  // the comm reads peers' processes (HostBackend::readsPeerProcesses)
};

// Runs one call of the collective on each of `world` thread ranks and counts rank 0's barriers.
Counted barriersOfOneCall(int world, bool reduce_scatter, bool symmetric_send,
                          symmarAlgo_t algo = symmarAlgoOneShot, size_t count = 16) {
  std::vector<symmarComm_t> comms(static_cast<size_t>(world));
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  Counted out;
  if (symmarCommInitAll(comms.data(), world, nullptr, &cfg) != symmarSuccess) return {false, 0};
  std::vector<uint32_t> before(static_cast<size_t>(world)), after(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  std::vector<int> failed(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      symmarComm_t comm = comms[static_cast<size_t>(r)];
      auto* host = dynamic_cast<symmar::HostBackend*>(comm->backend.get());
      std::vector<float> caller(count * static_cast<size_t>(world), 1.0f), recv(count * static_cast<size_t>(world));
      void* heap = nullptr;
      if (!host || (symmetric_send && symmarMemAlloc(comm, caller.size() * sizeof(float), &heap) != symmarSuccess)) {
        failed[static_cast<size_t>(r)] = 1;
        return;
      }
      float* send = symmetric_send ? static_cast<float*>(heap) : caller.data();
      for (size_t i = 0; i < caller.size(); ++i) send[i] = 1.0f;
      if (r == 0) out.reads_processes = host->readsPeerProcesses();
      before[static_cast<size_t>(r)] = host->barrierEpoch();
      const symmarResult_t res =
          reduce_scatter ? symmarReduceScatterAlgo(send, recv.data(), count, symmarFloat32, symmarSum, algo, comm, nullptr)
                         : symmarAllGatherAlgo(send, recv.data(), count, symmarFloat32, algo, comm, nullptr);
      after[static_cast<size_t>(r)] = host->barrierEpoch();
      failed[static_cast<size_t>(r)] = res != symmarSuccess;
      for (size_t i = 0; i < (reduce_scatter ? count : recv.size()); ++i) {
        if (recv[i] != (reduce_scatter ? world : 1)) failed[static_cast<size_t>(r)] = 1;
      }
      if (heap && symmarMemFree(comm, heap) != symmarSuccess) failed[static_cast<size_t>(r)] = 1;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    out.ok = out.ok && !failed[static_cast<size_t>(r)];
    out.ok = out.ok && after[static_cast<size_t>(r)] - before[static_cast<size_t>(r)] == after[0] - before[0];
    symmarCommDestroy(comms[static_cast<size_t>(r)]);
  }
  out.barriers = after[0] - before[0];
  return out;
}

TEST(HostBarriers, ScatterGatherWithCallerBuffersTakesOneBarrierPerChunk) {
  for (int world : {2, 3}) {
    for (bool rs : {true, false}) {
      const Counted c = barriersOfOneCall(world, rs, false);
      ASSERT_TRUE(c.ok) << "world " << world << (rs ? " reduce-scatter" : " all-gather");
      EXPECT_EQ(c.barriers, 1u) << "world " << world << (rs ? " reduce-scatter" : " all-gather")
                                << ": one chunk, no input read in place, so no end barrier";
    }
  }
}

TEST(HostBarriers, ScatterGatherReadingASymmetricSendBufferEndsWithABarrier) {
  for (bool rs : {true, false}) {
    const Counted c = barriersOfOneCall(2, rs, true);
    ASSERT_TRUE(c.ok) << (rs ? "reduce-scatter" : "all-gather");
    EXPECT_EQ(c.barriers, 2u) << (rs ? "reduce-scatter" : "all-gather")
                              << ": peers read the send buffer in place, so no rank returns before they are done";
  }
}

// From 32 KiB per rank an all-gather's peers copy a caller's send buffer from its process: one
// chunk, then the end barrier. With SYMMAR_HOST_CMA=0 it is staged. Ranks that are threads of one
// process can always read it (a process may read itself), so the comm must say it does.
TEST(HostBarriers, AllGatherReadingPeersProcessesEndsWithABarrier) {
  int word = 42, copy = 0;
  if (!symmar::crossMemoryRead(getpid(), &copy, reinterpret_cast<uintptr_t>(&word), sizeof(word))) {
    GTEST_SKIP() << "process_vm_readv is not available here (seccomp, capabilities, or an emulator without it): "
                 << strerror(errno);
  }
  const size_t at_threshold = (32 << 10) / sizeof(float);
  for (const char* cma : {"1", "0"}) {
    setenv("SYMMAR_HOST_CMA", cma, 1);
    for (size_t count : {at_threshold - 1, at_threshold}) {
      const Counted c = barriersOfOneCall(2, false, false, symmarAlgoOneShot, count);
      ASSERT_TRUE(c.ok) << "SYMMAR_HOST_CMA=" << cma << ", count " << count;
      EXPECT_EQ(c.reads_processes, *cma == '1') << "SYMMAR_HOST_CMA=" << cma;
      const bool read_from_process = *cma == '1' && count == at_threshold;
      EXPECT_EQ(c.barriers, read_from_process ? 2u : 1u) << "SYMMAR_HOST_CMA=" << cma << ", count " << count;
    }
  }
  unsetenv("SYMMAR_HOST_CMA");
}

TEST(HostBarriers, LamportScatterGatherTakesNoBarrier) {
  for (bool rs : {true, false}) {
    const Counted c = barriersOfOneCall(2, rs, false, symmarAlgoLamport);
    ASSERT_TRUE(c.ok) << (rs ? "reduce-scatter" : "all-gather");
    EXPECT_EQ(c.barriers, 0u) << (rs ? "reduce-scatter" : "all-gather");
  }
}

}  // namespace

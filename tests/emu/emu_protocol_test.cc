// The barrier and epoch protocol across calls, on the emulated runtime: a thousand calls with one
// persistent DeviceState (what CUDA graph replays do) while counts and algorithms change, epochs
// that wrap past 2^32, a rank that never launches, and a peer publishing an input offset outside its
// heap.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"
#include "plan/algorithms.h"

namespace symmar {
namespace emu {

TEST(Protocol, ManyCallsWithPersistentStateAndChangingShapes) {
  EmuOptions o;
  o.world = 3;
  EmuComm comm(o);
  CallRunner run(comm);
  const symmarAlgo_t algos[] = {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMultimem};
  const size_t counts[] = {1, 513, 4000, 77, 9000, 16};
  const int calls = longRunCalls();
  for (int n = 0; n < calls; ++n) {
    const symmarAlgo_t algo = algos[(n * 7 + n / 3) % 3];
    const symmarDataType_t dt = n % 5 == 0 ? symmarFloat16 : symmarFloat32;
    const std::string wrong = run.call(algo, dt, symmarSum, counts[n % 6], n % 4 == 1, n);
    ASSERT_EQ(wrong, "") << "call " << n << " (" << symmarAlgoName(algo) << ", count " << counts[n % 6] << ")";
  }
  // Every block saw every call: the epochs advanced together.
  EXPECT_EQ(comm.state(0).end_epoch, static_cast<uint32_t>(calls));
  EXPECT_EQ(comm.state(1).end_epoch, comm.state(2).end_epoch);
}

TEST(Protocol, EpochsWrapPastTwoToThe32) {
  EmuOptions o;
  o.world = 4;
  o.epoch_start = 0xfffffff0u;
  EmuComm comm(o);
  CallRunner run(comm);
  for (int n = 0; n < 24; ++n) {
    const symmarAlgo_t algo = n % 3 == 0 ? symmarAlgoOneShot : n % 3 == 1 ? symmarAlgoTwoShot : symmarAlgoMultimem;
    ASSERT_EQ(run.call(algo, symmarBfloat16, symmarMax, 3000, false, n), "") << "call " << n;
  }
  EXPECT_LT(comm.state(0).end_epoch, 100u) << "the done epoch wrapped";
}

TEST(Protocol, RankThatNeverLaunchesTimesOutTheOthers) {
  EmuOptions o;
  o.world = 3;
  o.timeout_ms = 300;
  EmuComm comm(o);
  std::vector<std::vector<char>> buf(3, std::vector<char>(4096));
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    EmuCall c{algo, symmarFloat32, symmarSum, 1000, {}, {}};
    for (auto& b : buf) {
      c.send.push_back(b.data());
      c.recv.push_back(b.data());
    }
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(comm.run(c, {0, 1}));  // rank 2 never launches
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 10.0) << "kernels must exit within their bounded spins";
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(comm.status(r)[gpu::kStatusCode], symmarTimeout) << "rank " << r;
      EXPECT_EQ(comm.status(r)[gpu::kStatusPeer], 2) << "rank " << r << " must name the missing peer";
    }
  }
}

// A peer announcing an input "in place" at an offset outside its heap (a corrupted or hostile
// rank): the others refuse it with symmarPeerFailure naming that rank, before reading anything.
TEST(Protocol, PeerInputOffsetOutsideItsHeapFailsTheCall) {
  static const uint64_t kHugeOffset = uint64_t{1} << 40;
  EmuOptions o;
  o.world = 2;
  o.timeout_ms = 2000;
  EmuComm comm(o);
  std::vector<char> send(4096), recv(4096);
  const gpu::KernelArgs a0 =
      gpu::makeKernelArgs(comm.context(0), send.data(), recv.data(), 512, symmarFloat32, symmarAlgoTwoShot,
                          callSignature(512, symmarFloat32, symmarSum, symmarAlgoTwoShot));
  // Rank 1 arrives at block 0's first barrier of the same call (its signature, numbered by the
  // calls done: none) with an input offset 1 TiB into its allocation: it pushes all three into its
  // line of rank 0's pad.
  char* pad0 = comm.base(0) + comm.context(0).layout.pad_off;
  uint32_t* flag = reinterpret_cast<uint32_t*>(pad0 + gpu::padFlagOffset(1, 0, sched::kSlotStart));
  const uint64_t signature = numberedSignature(a0.signature, comm.state(0).end_epoch);
  std::memcpy(reinterpret_cast<char*>(flag) + sched::kFlagInputWord, &kHugeOffset, sizeof(kHugeOffset));
  std::memcpy(reinterpret_cast<char*>(flag) + gpu::kFlagSignatureWord, &signature, sizeof(signature));
  *flag = 1;
  runConcurrently({Launch{gpu::kernelOf(symmarAlgoTwoShot, symmarFloat32, symmarSum, false), 1, a0}});
  EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarPeerFailure);
  EXPECT_EQ(comm.status(0)[gpu::kStatusPeer], 1);
}

// The same for the fused kernels, which read a peer's input in place since they may: an offset
// outside the peer's heap is refused in both forms (their bounds come from makeAddRmsNormArgs).
TEST(Protocol, FusedCallRefusesAPeerInputOffsetOutsideItsHeap) {
  static const uint64_t kHugeOffset = uint64_t{1} << 40;
  for (bool two_shot : {false, true}) {
    EmuOptions o;
    o.world = 2;
    o.timeout_ms = 2000;
    EmuComm comm(o);
    std::vector<float> in(64), out(64), norm(64), gamma(64, 1.0f);
    const AddRmsNormCall call{in.data(), nullptr, out.data(), norm.data(), gamma.data(), nullptr,
                              1.0f, 1e-6f, 1, 64, symmarFloat32};
    int grid = 0;
    const gpu::KernelArgs a0 = gpu::makeAddRmsNormArgs(comm.context(0), call,
                                                       two_shot ? symmarAlgoTwoShot : symmarAlgoOneShot, &grid);
    ASSERT_EQ(grid, 1) << "one token: one block, whose barrier rank 1 answers below";
    char* pad0 = comm.base(0) + comm.context(0).layout.pad_off;
    uint32_t* flag = reinterpret_cast<uint32_t*>(pad0 + gpu::padFlagOffset(1, 0, sched::kSlotStart));
    const uint64_t signature = numberedSignature(a0.signature, comm.state(0).end_epoch);
    std::memcpy(reinterpret_cast<char*>(flag) + sched::kFlagInputWord, &kHugeOffset, sizeof(kHugeOffset));
    std::memcpy(reinterpret_cast<char*>(flag) + gpu::kFlagSignatureWord, &signature, sizeof(signature));
    *flag = 1;
    runConcurrently({Launch{gpu::addRmsNormKernel(symmarFloat32, two_shot), 1, a0}});
    EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarPeerFailure) << (two_shot ? "twoshot" : "oneshot");
    EXPECT_EQ(comm.status(0)[gpu::kStatusPeer], 1);
  }
}

}  // namespace emu
}  // namespace symmar

namespace symmar {
namespace emu {

// A rank whose kernel timed out leaves its flags raised. A replay (or a call queued before the
// host noticed) must not pair with them: the failed rank's kernels and every peer's exit at entry
// without reading a peer, and the peer reports which rank had failed. Their outputs become NaN
// (every element, nothing past the count), so that a replayed graph cannot pass the last good
// results off as this step's.
TEST(Protocol, AfterATimeoutEveryKernelExitsAtEntryWithNanOutputs) {
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    EmuOptions o;
    o.world = 2;
    o.timeout_ms = 300;
    EmuComm comm(o);
    constexpr size_t kCount = 512;
    std::vector<std::vector<char>> send(2, std::vector<char>(kCount * 4)), recv(2, std::vector<char>(kCount * 4));
    EmuCall c{algo, symmarFloat32, symmarSum, kCount, {}, {}};
    for (int r = 0; r < 2; ++r) {
      fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), kCount, r, 0);
      c.send.push_back(send[static_cast<size_t>(r)].data());
      c.recv.push_back(recv[static_cast<size_t>(r)].data());
    }
    ASSERT_TRUE(comm.run(c, {0}));  // rank 1 is late: rank 0 gives up
    ASSERT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout);
    for (int r = 0; r < 2; ++r) {
      fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), kCount, r, 1);
      std::memset(recv[static_cast<size_t>(r)].data(), 0x5a, kCount * 4);
    }
    ASSERT_TRUE(comm.run(c));  // the replay: both ranks launch
    EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout) << "the first failure stays";
    EXPECT_EQ(comm.status(1)[gpu::kStatusCode], symmarPeerFailure) << symmarAlgoName(algo);
    EXPECT_EQ(comm.status(1)[gpu::kStatusPeer], 0) << "rank 1 names the rank that had failed";
    EXPECT_EQ(comm.status(1)[gpu::kStatusReason], gpu::kReasonPeerFailed);
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < kCount; ++i) {
        uint32_t w;
        std::memcpy(&w, recv[static_cast<size_t>(r)].data() + 4 * i, 4);
        ASSERT_EQ(w, 0x7fc00000u) << symmarAlgoName(algo) << ": rank " << r << " element " << i
                                  << " is not NaN after the comm failed";
      }
    }
  }
}

// The planner's algorithm traits and the kernels agree: on an NVSwitch with multicast, an
// algorithm is available for (dtype, op) exactly when a kernel serves it.
TEST(Protocol, AlgorithmTraitsMatchTheKernels) {
  symmarTopology_t topo{};
  topo.cc_major = 9;
  topo.link = symmarLinkNvSwitch;
  topo.world_size = 8;
  topo.multicast = 1;
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMultimem, symmarAlgoLamport}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      for (int op = 0; op < symmarNumOps; ++op) {
        const auto o = static_cast<symmarRedOp_t>(op);
        EXPECT_EQ(canImplement(algo, topo, {dt, o, 0}, 0) == Refusal::kNone, gpu::kernelOf(algo, dt, o, true) != nullptr)
            << symmarAlgoName(algo) << " dtype " << dt << " op " << op;
      }
    }
  }
}

// The co-residency cap is computed over everyKernel(), and comm creation loads its kernels: it must
// hold every kernel a call can launch, with the block size the launch uses, or a grid could outgrow
// what fits beside its peers, and a kernel's first launch could wait for peers' running ones.
TEST(Protocol, TheCoResidencyListHoldsEveryKernelACallCanLaunch) {
  const std::vector<gpu::KernelShape> all = gpu::everyKernel();
  auto listed = [&](const void* k, int threads) {
    for (const gpu::KernelShape& s : all) {
      if (s.kernel == k && s.threads == threads) return true;
    }
    return false;
  };
  for (int a = 0; a < symmarNumAlgos; ++a) {
    const auto algo = static_cast<symmarAlgo_t>(a);
    for (int d = 0; d < symmarNumTypes; ++d) {
      for (int op = 0; op < symmarNumOps; ++op) {
        const void* k = gpu::kernelOf(algo, static_cast<symmarDataType_t>(d), static_cast<symmarRedOp_t>(op), true);
        if (!k) continue;
        EXPECT_TRUE(listed(k, gpu::threadsFor(algo))) << symmarAlgoName(algo) << " dtype " << d << " op " << op;
      }
    }
  }
  for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
    for (bool two_shot : {false, true}) EXPECT_TRUE(listed(gpu::addRmsNormKernel(dt, two_shot), gpu::kThreads));
    EXPECT_TRUE(listed(gpu::addRmsNormRowsKernel(dt), gpu::kThreads)) << "the unfused call's add + norm";
  }
  for (int a = 0; a < symmarNumAlgos; ++a) {
    for (Collective coll : {Collective::kReduceScatter, Collective::kAllGather}) {
      for (int d = 0; d < symmarNumTypes; ++d) {
        for (int op = 0; op < symmarNumOps; ++op) {
          const void* k =
              gpu::scatterGatherKernelOf(static_cast<symmarAlgo_t>(a), coll, static_cast<symmarDataType_t>(d),
                                         static_cast<symmarRedOp_t>(op), true);
          if (!k) continue;
          EXPECT_TRUE(listed(k, gpu::kThreads)) << symmarAlgoName(static_cast<symmarAlgo_t>(a)) << " dtype " << d;
        }
      }
    }
  }
}

}  // namespace emu
}  // namespace symmar

// The push barrier and what rides on it, on the emulated runtime: grids that change from call to
// call, a failure pushed by one rank ending its peers' waits at once, and the co-scheduling probe
// that a comm with several ranks on one GPU runs before it trusts its kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// Each call launches as many blocks as its size needs, so consecutive calls run different grids;
// blocks that sit out a call must stay paired with the same blocks of their peers.
TEST(PushBarrier, GridsThatChangeFromCallToCall) {
  EmuOptions o;
  o.world = 3;
  o.blocks = 4;
  o.bytes_per_block = 512;
  o.staging_bytes = 16384;
  EmuComm comm(o);
  constexpr size_t kMax = 4096;
  std::vector<std::vector<char>> send(3, std::vector<char>(kMax * 4)), recv(3, std::vector<char>(kMax * 4));
  // f32 grids at 512 bytes a block, capped at 4: 1 element -> 1 block, 300 -> 3, 2000 -> 4, 130 -> 2.
  const size_t counts[] = {2000, 1, 300, 2000, 130, 1, 2000, 300};
  ASSERT_EQ(gpu::gridFor(comm.context(0), 300, symmarFloat32), 3);
  ASSERT_EQ(gpu::gridFor(comm.context(0), 130, symmarFloat32), 2);
  int n = 0;
  for (int round = 0; round < 6; ++round) {
    for (size_t count : counts) {
      for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMultimem}) {
        EmuCall c{algo, symmarFloat32, symmarSum, count, {}, {}};
        for (int r = 0; r < 3; ++r) {
          fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), count, r, n);
          c.send.push_back(send[static_cast<size_t>(r)].data());
          c.recv.push_back(recv[static_cast<size_t>(r)].data());
        }
        ASSERT_TRUE(comm.run(c));
        for (int r = 0; r < 3; ++r) ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0) << "call " << n << " rank " << r;
        ASSERT_EQ(checkOutputs(symmarFloat32, symmarSum, count, 3, n, c.recv), "")
            << "call " << n << " count " << count << " " << symmarAlgoName(algo);
        ++n;
      }
    }
  }
  for (int b = 0; b < o.blocks; ++b) {
    EXPECT_EQ(comm.state(0).start_epoch[b], comm.state(1).start_epoch[b]) << "block " << b;
    EXPECT_EQ(comm.state(0).start_epoch[b], comm.state(2).start_epoch[b]) << "block " << b;
  }
  EXPECT_NE(comm.state(0).start_epoch[0], comm.state(0).start_epoch[3]) << "block 3 sat out some calls";
}

// A rank that fails pushes its failed word into every pad; a peer waiting on it sees that word in
// its own pad and gives up at once with symmarPeerFailure, instead of waiting out its timeout.
TEST(PushBarrier, PeersStopWaitingAsSoonAsAFailedRankSaysSo) {
  EmuOptions o;
  o.world = 3;
  o.timeout_ms = 60000;
  EmuComm comm(o);
  std::vector<std::vector<char>> buf(3, std::vector<char>(4096));
  EmuCall c{symmarAlgoTwoShot, symmarFloat32, symmarSum, 1000, {}, {}};
  for (auto& b : buf) {
    c.send.push_back(b.data());
    c.recv.push_back(b.data());
  }
  // Rank 2 never launches; 200 ms in, it fails the way its kernel would (status, then the pushes).
  std::thread failing([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (int r = 0; r < 3; ++r) {
      auto* word = reinterpret_cast<uint32_t*>(comm.base(r) + comm.context(r).layout.pad_off + gpu::padFailedOffset(2));
      std::atomic_ref<uint32_t>(*word).store(1u, std::memory_order_release);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(comm.run(c, {0, 1}));
  const double secs = secondsSince(start);
  failing.join();
  EXPECT_LT(secs, 20.0) << "the waits ended on the pushed failure, not on the 60 s timeout";
  // Each survivor names the first failed rank it saw: rank 2, or the other survivor that had just
  // failed because of rank 2 (its failed word can arrive first). At least one names rank 2.
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(comm.status(r)[gpu::kStatusCode], symmarPeerFailure) << "rank " << r;
    const int peer = comm.status(r)[gpu::kStatusPeer];
    EXPECT_TRUE(peer == 2 || peer == 1 - r) << "rank " << r << ": " << peer;
    EXPECT_EQ(comm.status(r)[gpu::kStatusReason], gpu::kReasonPeerFailed) << "rank " << r;
    named = named || peer == 2;
  }
  EXPECT_TRUE(named) << "the failed rank is named";
}

TEST(CoScheduleProbe, KernelsRunningTogetherMeet) {
  for (int world : {2, 4, 8}) {
    EmuOptions o;
    o.world = world;
    EmuComm comm(o);
    std::vector<int> all;
    for (int r = 0; r < world; ++r) all.push_back(r);
    const auto results = comm.probe(all, false);
    for (int r = 0; r < world; ++r) EXPECT_EQ(results[static_cast<size_t>(r)][0], 1) << "world " << world << " rank " << r;
  }
}

// What a GPU that serialises the ranks' kernels does: each runs alone. No rank may conclude that
// its peers run concurrently (the first waits out its first round; the next finds the first's
// round-1 word but nobody for round 2).
TEST(CoScheduleProbe, KernelsRunOneAfterAnotherDoNotMeet) {
  EmuOptions o;
  o.world = 3;
  o.timeout_ms = 300;  // the first round waits at most this long
  EmuComm comm(o);
  const auto start = std::chrono::steady_clock::now();
  const auto results = comm.probe({0, 1, 2}, true);
  EXPECT_LT(secondsSince(start), 20.0) << "every wait of the probe is bounded";
  for (int r = 0; r < 3; ++r) EXPECT_EQ(results[static_cast<size_t>(r)][0], 0) << "rank " << r;
}

// The same over pinned host memory (a host-staged comm whose ranks share a GPU): its kernels spin
// on each other just the same, so the probe must judge them too, meeting when they run together
// and not when they run one after another.
TEST(CoScheduleProbe, HostStagedKernelsAreJudgedTheSameWay) {
  EmuOptions o;
  o.world = 3;
  o.host_staged = true;
  o.multicast = false;
  {
    EmuComm comm(o);
    for (const auto& r : comm.probe({0, 1, 2}, false)) EXPECT_EQ(r[0], 1) << "running together";
  }
  o.timeout_ms = 300;  // the first round waits at most this long
  EmuComm comm(o);
  for (const auto& r : comm.probe({0, 1, 2}, true)) EXPECT_EQ(r[0], 0) << "one after another";
}

TEST(CoScheduleProbe, ARankThatNeverLaunchesFailsItsPeers) {
  EmuOptions o;
  o.world = 4;
  o.timeout_ms = 300;
  EmuComm comm(o);
  const auto results = comm.probe({0, 1, 3}, false);
  for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i][0], 0) << "launched rank #" << i;
}

}  // namespace emu
}  // namespace symmar

namespace symmar {
namespace emu {

TEST(PeerAccessProbe, WorkingLinksCheckOut) {
  for (int world : {2, 5, 8}) {
    EmuOptions o;
    o.world = world;
    o.staging_bytes = 65536;
    EmuComm comm(o);
    const auto rows = comm.peerAccessProbe(0x1234u + static_cast<uint32_t>(world));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(rows[static_cast<size_t>(r)][0], 1) << "world " << world << " rank " << r;
      for (int p = 0; p < world; ++p) EXPECT_EQ(rows[static_cast<size_t>(r)][2 + p], 0) << r << "->" << p;
    }
  }
}

// Rank 1's view of rank 2 is broken (its stores vanish, its loads read zeros): both ends of that
// pair report it, every other pair checks out.
TEST(PeerAccessProbe, ALinkThatDropsTrafficIsFoundFromBothEnds) {
  EmuOptions o;
  o.world = 4;
  o.staging_bytes = 65536;
  o.timeout_ms = 300;
  EmuComm comm(o);
  const auto rows = comm.peerAccessProbe(0xabcdu, 1, 2);
  EXPECT_EQ(rows[1][0], 0);
  EXPECT_EQ(rows[1][2 + 2], 2048 / 4) << "every word rank 1 loaded from rank 2 (rank 2's flag and stores came)";
  EXPECT_EQ(rows[2][0], 0);
  EXPECT_EQ(rows[2][2 + 1], gpu::kP2pTimedOut) << "rank 1's flag to rank 2 vanished too";
  for (int r : {0, 3}) {
    EXPECT_EQ(rows[static_cast<size_t>(r)][0], 1) << "rank " << r;
  }
  EXPECT_EQ(rows[1][2 + 0], 0);
  EXPECT_EQ(rows[2][2 + 3], 0);
}

}  // namespace emu
}  // namespace symmar

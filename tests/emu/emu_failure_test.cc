// Failures that need ranks out of step: a rank held at a chosen flag (the emulator's acquire hook)
// while its peer times out, gives up and reuses its buffers; ranks that make different calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

std::atomic<const char*> g_hold_from{nullptr};
std::atomic<const char*> g_hold_to{nullptr};
std::atomic<bool> g_released{false};

/// Holds every hooked access in [g_hold_from, g_hold_to) until the test releases it.
void holdInRange(const void* address) {
  const char* p = static_cast<const char*>(address);
  if (p < g_hold_from.load() || p >= g_hold_to.load()) return;
  while (!g_released.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// Runs l1 on rank 1, held at its first access to [from, from + bytes), and l0 on rank 0 until its
/// kernel ends; then `reuse` (what rank 0's stream does next with its buffers) before rank 1 is
/// released. Returns once rank 1 has ended too.
template <typename Reuse>
void runWhileRank1IsHeld(EmuComm& comm, const Launch& l0, const Launch& l1, const void* from, size_t bytes,
                         Reuse reuse) {
  g_released = false;
  g_hold_from = static_cast<const char*>(from);
  g_hold_to = static_cast<const char*>(from) + bytes;
  setAccessHook(holdInRange);
  std::thread rank1([&] { comm.launchOn(1, l1); });
  comm.launchOn(0, l0);
  reuse();
  g_released.store(true, std::memory_order_release);
  rank1.join();
  setAccessHook(nullptr);
}

/// Two ranks of one block each, without multicast: the late-rank cases' comm.
EmuOptions twoRanksOfOneBlock() {
  EmuOptions o;
  o.world = 2;
  o.blocks = 1;
  o.multicast = false;
  return o;
}

/// Rank 1's slot in rank 0's current lamport buffer (buffer 0): where rank 1 pushes.
const char* rank1LamportSlot(EmuComm& comm) {
  return comm.base(0) + comm.context(0).layout.lamport_off + sched::lamportSlotOffset(0, 1, 2);
}

// One-shot; rank 0's input lives in the symmetric heap, so rank 1 reads it in place. Rank 1 has
// published its start flag and is held before it looks at rank 0's. Rank 0 meets rank 1's flag,
// then waits for rank 1's done flag (its input is read in place), times out and ends its kernel;
// its stream reuses the input. Released, rank 1 finds rank 0's start flag, which rank 0 published
// before giving up, and reads the reused input: that call must fail on rank 1 too, not succeed.
TEST(LateRank, FailsTheCallItsPeerTimedOutOfInsteadOfReducingReusedInput) {
  EmuComm comm(twoRanksOfOneBlock());
  constexpr size_t kCount = 512;
  char* sym = comm.symmetricAlloc(kCount * 4)[0];
  std::vector<char> send1(kCount * 4), recv0(kCount * 4), recv1(kCount * 4);
  fillInput(symmarFloat32, sym, kCount, 0, 0);
  fillInput(symmarFloat32, send1.data(), kCount, 1, 0);
  EmuCall c{symmarAlgoOneShot, symmarFloat32, symmarSum, kCount, {sym, send1.data()}, {recv0.data(), recv1.data()}};
  Launch l0 = comm.launchOf(0, c);
  ASSERT_NE(l0.args.send_offset, gpu::kStagedInput) << "rank 0's input must be read in place";
  l0.args.timeout_ns = 100 * 1000000ll;
  const Launch l1 = comm.launchOf(1, c);
  ASSERT_EQ(l1.args.send_offset, gpu::kStagedInput);

  // Rank 1's line for rank 0's start flag (block 0).
  const char* pad1 = comm.base(1) + comm.context(1).layout.pad_off;
  runWhileRank1IsHeld(comm, l0, l1, pad1 + gpu::padFlagOffset(0, 0, sched::kSlotStart), sizeof(uint32_t), [&] {
    for (size_t i = 0; i < kCount; ++i) storeAs(symmarFloat32, sym, i, 1e6);  // rank 0's stream reuses its input
  });
  EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout) << "rank 0 gave up waiting for rank 1's done flag";
  EXPECT_NE(comm.status(1)[gpu::kStatusCode], 0) << "rank 1 reduced rank 0's abandoned input and reported success";
  EXPECT_EQ(comm.status(1)[gpu::kStatusPeer], 0) << "rank 1 names rank 0";
}

// lamport: rank 1 has passed its entry check but is held before it pushes its data; rank 0 pushes
// its own, waits for rank 1's, times out and ends. Released, rank 1 finds rank 0's data whole in its
// buffer; the values would be right, but rank 0 failed the call, so rank 1 must not succeed.
TEST(LateRank, LamportFailsTheCallItsPeerTimedOutOf) {
  EmuComm comm(twoRanksOfOneBlock());
  constexpr size_t kCount = 300;
  std::vector<std::vector<char>> send(2, std::vector<char>(kCount * 4)), recv = send;
  for (int r = 0; r < 2; ++r) fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), kCount, r, 0);
  EmuCall c{symmarAlgoLamport, symmarFloat32, symmarSum, kCount, {send[0].data(), send[1].data()},
            {recv[0].data(), recv[1].data()}};
  Launch l0 = comm.launchOf(0, c);
  l0.args.timeout_ns = 100 * 1000000ll;
  const Launch l1 = comm.launchOf(1, c);
  runWhileRank1IsHeld(comm, l0, l1, rank1LamportSlot(comm), sched::kLamportSlotBytes, [] {});
  EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout) << "rank 0 gave up waiting for rank 1's data";
  EXPECT_NE(comm.status(1)[gpu::kStatusCode], 0) << "rank 1 completed a call rank 0 had failed";
}

// The same for the fused lamport form: rank 1 is held before it pushes its rows; rank 0 pushes its
// own, times out waiting for rank 1's and ends, and its stream reuses its input. Released, rank 1
// finds rank 0's rows whole in its buffer: it must fail the call, not finish the rows.
TEST(LateRank, FusedLamportFailsTheCallItsPeerTimedOutOf) {
  EmuComm comm(twoRanksOfOneBlock());
  constexpr size_t kTokens = 2, kHidden = 128, kCount = kTokens * kHidden;
  std::vector<std::vector<float>> in(2, std::vector<float>(kCount, 1.0f)), out = in, norm = in;
  const std::vector<float> gamma(kHidden, 1.0f);
  std::vector<Launch> l;
  for (int r = 0; r < 2; ++r) {
    l.push_back(comm.fusedLamportF32LaunchOf(r, in[r].data(), out[r].data(), norm[r].data(), gamma.data(), kTokens, kHidden));
  }
  l[0].args.timeout_ns = 100 * 1000000ll;
  runWhileRank1IsHeld(comm, l[0], l[1], rank1LamportSlot(comm), sched::kLamportSlotBytes, [&] {
    for (float& x : in[0]) x = 1e6f;  // rank 0's stream reuses its input
  });
  EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout) << "rank 0 gave up waiting for rank 1's rows";
  EXPECT_NE(comm.status(1)[gpu::kStatusCode], 0) << "rank 1 completed a fused call rank 0 had failed";
}

// After a failure, a fused call (as a replayed graph would make it) writes NaN over all three of
// its outputs on every rank: residual and norm (bf16 0x7fc0) and the FP8 output (E4M3 0x7f).
TEST(FailedComm, FusedCallWritesNanOverEveryOutput) {
  EmuOptions o;
  o.world = 2;
  o.timeout_ms = 200;
  o.multicast = false;
  o.staging_bytes = 64 << 10;
  EmuComm comm(o);
  std::vector<char> a(4096), b(4096);
  EmuCall c{symmarAlgoOneShot, symmarFloat32, symmarSum, 512, {a.data(), b.data()}, {a.data(), b.data()}};
  ASSERT_TRUE(comm.run(c, {0}));  // rank 1 never comes: rank 0 times out
  ASSERT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout);
  const size_t tokens = 3, hidden = 100, n = tokens * hidden;
  std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(n)), res(2, std::vector<uint16_t>(n + 8, 0x1234)),
      norm = res;
  std::vector<std::vector<unsigned char>> q(2, std::vector<unsigned char>(n + 8, 0x11));
  std::vector<uint16_t> gamma(hidden);
  std::vector<AddRmsNormCall> calls;
  for (int r = 0; r < 2; ++r) {
    calls.push_back(AddRmsNormCall{in[r].data(), nullptr, res[r].data(), norm[r].data(), gamma.data(), q[r].data(),
                                   1.0f, 1e-6f, tokens, hidden, symmarBfloat16});
  }
  ASSERT_TRUE(comm.runAddRmsNorm(calls, symmarAlgoTwoShot));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(res[r][i], 0x7fc0) << "rank " << r << " residual " << i;
      ASSERT_EQ(norm[r][i], 0x7fc0) << "rank " << r << " norm " << i;
      ASSERT_EQ(q[r][i], 0x7f) << "rank " << r << " fp8 " << i;
    }
    for (size_t i = n; i < n + 8; ++i) {
      ASSERT_EQ(res[r][i], 0x1234) << "rank " << r << ": written past the call";
      ASSERT_EQ(q[r][i], 0x11) << "rank " << r << ": written past the call";
    }
  }
}

// A lamport block that fails at entry while a sibling block of the same kernel passed its entry
// (the comm failed in between, as a peer's mismatch reported mid-call makes it) poisons only the
// share it would have written: the sibling may be writing its own rows. Each block runs alone, as
// one that starts after its siblings have ended; the comm is marked failed as a sibling's report
// leaves it. Only once every block has run is every output NaN, and nothing past the call is.
TEST(FailedComm, ALamportBlockFailingAtEntryPoisonsOnlyItsOwnShare) {
  EmuOptions o;
  o.world = 2;
  o.multicast = false;
  EmuComm comm(o);
  comm.state(0).reported = 1;
  const uint32_t kNanBits = 0x7fc00000u;
  auto isNan = [&](float x) {
    uint32_t w;
    std::memcpy(&w, &x, 4);
    return w == kNanBits;
  };
  // Fused: 6 rows of 64; block b owns rows b, b + grid, ...
  constexpr size_t kTokens = 6, kHidden = 64, kCount = kTokens * kHidden;
  std::vector<float> in(kCount, 1.0f), out(kCount + 8, 5.0f), norm = out;
  const std::vector<float> gamma(kHidden, 1.0f);
  Launch fused = comm.fusedLamportF32LaunchOf(0, in.data(), out.data(), norm.data(), gamma.data(), kTokens, kHidden);
  ASSERT_GE(fused.blocks, 2);
  for (int b = 0; b < fused.blocks; ++b) {
    fused.only_block = b;
    comm.launchOn(0, fused);
    for (size_t row = 0; row < kTokens; ++row) {
      const bool poisoned = static_cast<int>(row % static_cast<size_t>(fused.blocks)) <= b;
      for (size_t i = row * kHidden; i < (row + 1) * kHidden; ++i) {
        ASSERT_EQ(isNan(out[i]), poisoned) << "after block " << b << ": row " << row;
        ASSERT_EQ(isNan(norm[i]), poisoned) << "after block " << b << ": row " << row;
      }
    }
  }
  for (size_t i = kCount; i < kCount + 8; ++i) ASSERT_TRUE(out[i] == 5.0f && norm[i] == 5.0f) << "written past the call";

  // Plain: 3000 elements; each block's share is one run of them, apart from every other block's.
  constexpr size_t kPlain = 3000;
  std::vector<float> send(kPlain, 1.0f), recv(kPlain + 8, 5.0f);
  EmuCall c{symmarAlgoLamport, symmarFloat32, symmarSum, kPlain, {send.data(), nullptr}, {recv.data(), nullptr}};
  Launch plain = comm.launchOf(0, c);
  ASSERT_GE(plain.blocks, 2);
  size_t poisoned = 0;
  for (int b = 0; b < plain.blocks; ++b) {
    plain.only_block = b;
    comm.launchOn(0, plain);
    size_t now = 0;
    for (size_t i = 0; i < kPlain; ++i) now += isNan(recv[i]) ? 1 : 0;
    ASSERT_GT(now, poisoned) << "block " << b << " poisoned nothing";
    if (b + 1 < plain.blocks) {
      ASSERT_LT(now, kPlain) << "block " << b << " poisoned its siblings' shares";
    }
    poisoned = now;
  }
  EXPECT_EQ(poisoned, kPlain);
  for (size_t i = kPlain; i < kPlain + 8; ++i) ASSERT_EQ(recv[i], 5.0f) << "written past the call";
}

// The same where the call's one row is spread over a group of 4 blocks (1000 float32: 250 vectors):
// a block that fails at entry poisons its part of the row only. Parts lie in block order, so after
// blocks 0..b have run alone the poison is a prefix of the row, ending at a vector boundary, longer
// after every block and the whole row only after the last.
TEST(FailedComm, ALamportBlockOfARowGroupPoisonsOnlyItsPart) {
  EmuOptions o;
  o.world = 2;
  o.multicast = false;
  o.blocks = 4;
  EmuComm comm(o);
  comm.state(0).reported = 1;
  constexpr size_t kHidden = 1000;
  std::vector<float> in(kHidden, 1.0f), out(kHidden + 8, 5.0f), norm = out;
  const std::vector<float> gamma(kHidden, 1.0f);
  Launch fused = comm.fusedLamportF32LaunchOf(0, in.data(), out.data(), norm.data(), gamma.data(), 1, kHidden);
  ASSERT_EQ(fused.args.row_parts, 4);
  ASSERT_EQ(fused.blocks, 4);
  size_t prefix = 0;
  for (int b = 0; b < fused.blocks; ++b) {
    fused.only_block = b;
    comm.launchOn(0, fused);
    size_t now = 0;
    while (now < kHidden && std::isnan(out[now])) ++now;
    for (size_t i = now; i < kHidden; ++i) ASSERT_EQ(out[i], 5.0f) << "after block " << b << ": element " << i;
    for (size_t i = 0; i < kHidden; ++i) ASSERT_EQ(std::isnan(norm[i]), i < now) << "after block " << b;
    ASSERT_GT(now, prefix) << "block " << b << " poisoned nothing";
    ASSERT_EQ(now % 4, 0u) << "block " << b << " ended its part inside a vector";
    if (b + 1 < fused.blocks) {
      ASSERT_LT(now, kHidden) << "block " << b << " poisoned its siblings' parts";
    }
    prefix = now;
  }
  EXPECT_EQ(prefix, kHidden);
  for (size_t i = kHidden; i < kHidden + 8; ++i) ASSERT_TRUE(out[i] == 5.0f && norm[i] == 5.0f) << "written past the call";
}

// A fused call whose row is spread over a group of 8 blocks, where rank 1 runs only block 0 (its
// siblings never start, as blocks that a failing GPU never schedules). One-shot: rank 0's blocks
// 1-7 time out at their start barriers; its block 0 passed its barrier and waits at the row group's
// barrier for them, and must give up when the comm fails instead of waiting on. Lamport: rank 0's
// blocks 1-7 time out waiting for rank 1's parts of the row. Rank 1's block 0 waits for siblings
// that never come: it gives up at its timeout. Neither rank succeeds.
void siblingsNeverArrive(symmarAlgo_t form) {
  EmuOptions o;
  o.world = 2;
  o.blocks = 8;
  o.multicast = false;
  o.staging_bytes = 256 << 10;
  EmuComm comm(o);
  constexpr size_t kHidden = 4096;
  std::vector<std::vector<float>> in(2, std::vector<float>(kHidden, 1.0f)), out = in, norm = in;
  const std::vector<float> gamma(kHidden, 1.0f);
  std::vector<Launch> launches;
  for (int r = 0; r < 2; ++r) {
    const AddRmsNormCall call{in[r].data(), nullptr, out[r].data(), norm[r].data(), gamma.data(), nullptr,
                              1.0f, 1e-6f, 1, kHidden, symmarFloat32};
    launches.push_back(comm.addRmsNormLaunchOf(r, call, form));
    launches.back().args.timeout_ns = 300 * 1000000ll;
  }
  ASSERT_EQ(launches[0].args.row_parts, 8);
  ASSERT_EQ(launches[0].blocks, 8);
  launches[1].only_block = 0;
  const auto start = std::chrono::steady_clock::now();
  runConcurrently(launches);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(comm.status(0)[gpu::kStatusCode], symmarTimeout) << "rank 0's blocks 1-7 waited for rank 1's blocks";
  EXPECT_EQ(comm.status(1)[gpu::kStatusCode], symmarTimeout) << "rank 1's block 0 waited for its siblings";
  EXPECT_EQ(comm.status(1)[gpu::kStatusReason], gpu::kReasonRowGroupTimeout)
      << "rank 1's failure names its own blocks, not a peer";
  EXPECT_EQ(comm.status(1)[gpu::kStatusBlock], 0);
  EXPECT_LT(seconds, 10.0) << "a wait at the row group's barrier outlived the failure";
}

TEST(RowGroup, ABlockWhoseSiblingsNeverArriveGivesUpAndTheCallFails) {
  for (symmarAlgo_t form : {symmarAlgoOneShot, symmarAlgoLamport}) {
    SCOPED_TRACE(symmarAlgoName(form));
    ASSERT_NO_FATAL_FAILURE(siblingsNeverArrive(form));
  }
}

// Ranks that make different calls: each rank's start barrier carries its call's signature, so a
// mismatch fails the comm on every rank (symmarInvalidUsage) instead of pairing the calls. Each
// pair runs on a fresh comm with one block a call, so both ranks meet at the same flags: another
// count (rank 0 would read the tail of rank 1's staging, left by an earlier call), another op, and
// another algorithm. A matched call first leaves data in the staging.
TEST(MismatchedCalls, FailOnEveryRankInsteadOfPairing) {
  struct Side {
    symmarAlgo_t algo;
    symmarRedOp_t op;
    size_t count;
  };
  const std::vector<std::pair<Side, Side>> pairs = {
      {{symmarAlgoOneShot, symmarSum, 512}, {symmarAlgoOneShot, symmarSum, 500}},
      {{symmarAlgoOneShot, symmarSum, 512}, {symmarAlgoOneShot, symmarMax, 512}},
      {{symmarAlgoOneShot, symmarSum, 512}, {symmarAlgoTwoShot, symmarSum, 512}},
  };
  for (const auto& [side0, side1] : pairs) {
    EmuOptions o;
    o.world = 2;
    o.blocks = 1;
    o.multicast = false;
    o.timeout_ms = 2000;
    EmuComm comm(o);
    std::vector<std::vector<char>> send(2, std::vector<char>(512 * 4)), recv = send;
    for (int r = 0; r < 2; ++r) fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), 512, r, 1);
    EmuCall matched{symmarAlgoOneShot, symmarFloat32, symmarSum, 512, {send[0].data(), send[1].data()},
                    {recv[0].data(), recv[1].data()}};
    ASSERT_TRUE(comm.run(matched));
    ASSERT_EQ(comm.status(0)[gpu::kStatusCode], 0);
    std::vector<Launch> launches;
    int r = 0;
    for (const Side& side : {side0, side1}) {
      EmuCall c{side.algo, symmarFloat32, side.op, side.count, {send[0].data(), send[1].data()},
                {recv[0].data(), recv[1].data()}};
      launches.push_back(comm.launchOf(r++, c));
    }
    runConcurrently(launches);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(comm.status(rank)[gpu::kStatusCode], symmarInvalidUsage)
          << "rank " << rank << ": " << symmarAlgoName(side0.algo) << " " << side0.count << " against "
          << symmarAlgoName(side1.algo) << " " << side1.count;
      EXPECT_EQ(comm.status(rank)[gpu::kStatusReason], gpu::kReasonCallMismatch) << "rank " << rank;
    }
  }
}

}  // namespace
}  // namespace emu
}  // namespace symmar

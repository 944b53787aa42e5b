// The lamport kernel (cuda/lamport.cu) on the emulated runtime: every dtype and op, counts up to its
// 256 KiB limit, worlds 2..8, in place and misaligned; -0.0, NaN, inf and the f32 empty pattern as
// inputs; 1,000 calls rotating the buffers (mixed with barrier kernels); a rank that never writes,
// a mismatched call, a timeout followed by a replay; and the grid dependency of programmatic
// dependent launch, which must come before the first read of input.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

struct LamportCase {
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  int world;
  int mode;  // 0 out of place, 1 in place, 2 misaligned by one element
};

void PrintTo(const LamportCase& c, std::ostream* os) { *os << "count " << c.count << " world " << c.world; }

std::string lamportName(const testing::TestParamInfo<LamportCase>& info) {
  const LamportCase& c = info.param;
  static const char* dt[] = {"f32", "f16", "bf16"};
  static const char* op[] = {"sum", "max", "min"};
  static const char* mode[] = {"out", "inplace", "misaligned"};
  return std::string(dt[c.dtype]) + "_" + op[c.op] + "_n" + std::to_string(c.count) + "_w" + std::to_string(c.world) +
         "_" + mode[c.mode];
}

/// Runs one lamport call with rank r's input filled by fill(r, send) and returns the outputs.
template <typename Fill>
std::vector<std::vector<char>> runLamport(EmuComm& comm, symmarDataType_t dt, symmarRedOp_t op, size_t count,
                                          int mode, Fill fill) {
  const size_t elem = symmarTypeSize(dt);
  const size_t offset = mode == 2 ? elem : 0;
  std::vector<std::vector<char>> send(static_cast<size_t>(comm.world()), std::vector<char>(count * elem + 32));
  std::vector<std::vector<char>> recv = send;
  EmuCall call{symmarAlgoLamport, dt, op, count, {}, {}};
  for (int r = 0; r < comm.world(); ++r) {
    char* s = send[static_cast<size_t>(r)].data() + offset;
    fill(r, s);
    call.send.push_back(s);
    call.recv.push_back(mode == 1 ? s : recv[static_cast<size_t>(r)].data() + offset);
  }
  EXPECT_TRUE(comm.run(call));
  std::vector<std::vector<char>> out;
  for (int r = 0; r < comm.world(); ++r) {
    const char* p = static_cast<const char*>(call.recv[static_cast<size_t>(r)]);
    out.emplace_back(p, p + count * elem);
  }
  return out;
}

class Lamport : public testing::TestWithParam<LamportCase> {};

TEST_P(Lamport, MatchesFloat64ReferenceOnEveryRank) {
  const LamportCase c = GetParam();
  EmuOptions o;
  o.world = c.world;
  o.multicast = false;
  EmuComm comm(o);
  const auto out = runLamport(comm, c.dtype, c.op, c.count, c.mode,
                              [&](int r, char* s) { fillInput(c.dtype, s, c.count, r, 0); });
  for (int r = 0; r < c.world; ++r) ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
  std::vector<void*> recv;
  for (auto& b : out) recv.push_back(const_cast<char*>(b.data()));
  EXPECT_EQ(checkOutputs(c.dtype, c.op, c.count, c.world, 0, recv), "");
}

std::vector<LamportCase> lamportCases() {
  std::vector<LamportCase> cases;
  int k = 0;
  for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
    const size_t limit = sched::kLamportMaxBytes / symmarTypeSize(dt);
    const size_t vec = sched::vecElems(symmarTypeSize(dt));
    for (int op = 0; op < symmarNumOps; ++op) {
      for (size_t count : {size_t(1), size_t(7), vec - 1, size_t(1000), limit - 1, limit}) {
        cases.push_back({dt, static_cast<symmarRedOp_t>(op), count, 2 + k % 7, k % 3});
        ++k;
      }
    }
  }
  for (int world = 2; world <= 8; ++world) cases.push_back({symmarBfloat16, symmarSum, 3584, world, world % 3});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Emulated, Lamport, testing::ValuesIn(lamportCases()), lamportName);

uint32_t f32Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Inputs the empty pattern could be confused with, and values that must pass through untouched.
// Expected values are worked by hand from IEEE rules and the documented mapping.
TEST(LamportValues, SignedZerosNanInfAndTheEmptyPattern) {
  EmuOptions o;
  o.world = 3;
  o.multicast = false;
  EmuComm comm(o);
  constexpr size_t kCount = 5;
  const float nan = std::nanf("");
  const float inf = INFINITY;
  // f32: element 0 is -0.0 on every rank, 1 NaN on rank 1, 2 +inf on rank 0, 3 +inf and -inf,
  // 4 the empty bit pattern 0x80008000 (the denormal -4.6e-41) on rank 2.
  const auto out = runLamport(comm, symmarFloat32, symmarSum, kCount, 0, [&](int r, char* s) {
    float v[kCount] = {-0.0f, r == 1 ? nan : 1.0f, r == 0 ? inf : 2.0f, r == 0 ? inf : r == 1 ? -inf : 0.0f, 3.0f};
    std::memcpy(s, v, sizeof(v));
    if (r == 2) std::memcpy(s + 16, &sched::kLamportEmpty, 4);
  });
  float got[kCount];
  std::memcpy(got, out[0].data(), sizeof(got));
  EXPECT_EQ(f32Bits(got[0]), 0x80000000u) << "f32 -0.0 travels unchanged: -0 + -0 + -0 = -0";
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], inf);
  EXPECT_TRUE(std::isnan(got[3])) << "inf + -inf";
  EXPECT_EQ(got[4], 6.0f) << "3 + 3 + (the empty pattern sent as -0.0)";
  for (int r = 1; r < 3; ++r) EXPECT_EQ(std::memcmp(out[0].data(), out[static_cast<size_t>(r)].data(), sizeof(got)), 0);

  // f16/bf16: -0.0 (0x8000) on every rank is sent as +0.0, so the sum is +0.0 on every rank.
  for (symmarDataType_t dt : {symmarFloat16, symmarBfloat16}) {
    const auto h = runLamport(comm, dt, symmarSum, 9, 0, [&](int r, char* s) {
      fillInput(dt, s, 9, r, 0);
      const uint16_t neg_zero = 0x8000;
      std::memcpy(s + 2 * 3, &neg_zero, 2);
    });
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0);
      uint16_t bits;
      std::memcpy(&bits, h[static_cast<size_t>(r)].data() + 6, 2);
      EXPECT_EQ(bits, 0x0000u) << "rank " << r << ": -0.0 sent as +0.0";
      for (size_t i = 0; i < 9; ++i) {
        if (i == 3) continue;
        double ref = 0;
        for (int q = 0; q < 3; ++q) ref += inputValue(q, i, 0);
        EXPECT_EQ(loadAs(dt, h[static_cast<size_t>(r)].data(), i), ref) << "element " << i;
      }
    }
  }
}

// The three buffers rotate across 1,000 calls (longRunCalls) of changing size, with one-shot and two-shot calls in
// between, on one persistent DeviceState (what CUDA graph replays do).
TEST(LamportProtocol, ManyCallsRotateTheBuffers) {
  EmuOptions o;
  o.world = 4;
  o.multicast = false;
  EmuComm comm(o);
  CallRunner run(comm);
  const size_t counts[] = {1, 4096, 77, 5000, 8, 1023};
  uint32_t lamport_calls = 0;
  const int calls = longRunCalls();
  for (int n = 0; n < calls; ++n) {
    const symmarAlgo_t algo = n % 7 == 3 ? symmarAlgoOneShot : n % 11 == 5 ? symmarAlgoTwoShot : symmarAlgoLamport;
    const symmarDataType_t dt = n % 5 == 0 ? symmarBfloat16 : symmarFloat32;
    ASSERT_EQ(run.call(algo, dt, symmarSum, counts[n % 6], false, n), "") << "call " << n << " " << symmarAlgoName(algo);
    if (algo == symmarAlgoLamport) ++lamport_calls;
  }
  EXPECT_EQ(comm.state(0).lamport_calls, lamport_calls);
}

TEST(LamportFailure, ARankThatNeverWritesTimesOutTheOthers) {
  EmuOptions o;
  o.world = 3;
  o.timeout_ms = 300;
  o.multicast = false;
  EmuComm comm(o);
  std::vector<std::vector<char>> buf(3, std::vector<char>(4096));
  EmuCall c{symmarAlgoLamport, symmarFloat32, symmarSum, 1000, {}, {}};
  for (auto& b : buf) {
    c.send.push_back(b.data());
    c.recv.push_back(b.data());
  }
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(comm.run(c, {0, 1}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(comm.status(r)[gpu::kStatusCode], symmarTimeout) << "rank " << r;
    EXPECT_EQ(comm.status(r)[gpu::kStatusPeer], 2) << "rank " << r << " names the rank that never wrote";
  }
  // The failure is sticky: a replay with every rank launching reads nothing and writes NaN over its
  // output (the 1,000 elements of the call, nothing after them).
  for (auto& b : buf) std::memset(b.data(), 0x5a, b.size());
  ASSERT_TRUE(comm.run(c));
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
    const std::vector<char>& b = buf[static_cast<size_t>(r)];
    for (size_t i = 0; i < 1000; ++i) {
      uint32_t w;
      std::memcpy(&w, b.data() + 4 * i, 4);
      ASSERT_EQ(w, 0x7fc00000u) << "rank " << r << " element " << i << " is not NaN after the failure";
    }
    for (size_t i = 4000; i < b.size(); ++i) ASSERT_EQ(static_cast<unsigned char>(b[i]), 0x5a) << "rank " << r;
  }
}

// One fused lamport call (2 rows of 128 float32, no residual, gamma 1) on every rank, inputs
// varied by rank and n: "" when every rank succeeded with the exact sums, else what went wrong.
std::string fusedLamportCall(EmuComm& comm, int n) {
  constexpr size_t kTokens = 2, kHidden = 128, kCount = kTokens * kHidden;
  const int world = comm.world();
  std::vector<std::vector<float>> in(world, std::vector<float>(kCount)), out = in, norm = in;
  const std::vector<float> gamma(kHidden, 1.0f);
  std::vector<Launch> launches;
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < kCount; ++i) in[r][i] = static_cast<float>((r * 7 + static_cast<int>(i) + n) % 13) - 6;
    launches.push_back(
        comm.fusedLamportF32LaunchOf(r, in[r].data(), out[r].data(), norm[r].data(), gamma.data(), kTokens, kHidden));
  }
  runConcurrently(launches);
  for (int r = 0; r < world; ++r) {
    if (comm.status(r)[gpu::kStatusCode] != 0) return "rank " + std::to_string(r) + " failed";
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int q = 0; q < world; ++q) want += in[q][i];
      if (out[r][i] != want) return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
    }
  }
  return "";
}

// The fused lamport form when rank 2 never launches: ranks 0 and 1 time out naming it; then, the
// failure being sticky, a replay on every rank writes NaN over residual_out and norm_out.
TEST(LamportFailure, AFusedCallWhoseRankNeverWritesTimesOutThenPoisonsItsOutputs) {
  EmuOptions o;
  o.world = 3;
  o.timeout_ms = 300;
  o.multicast = false;
  EmuComm comm(o);
  constexpr size_t kTokens = 3, kHidden = 64, kCount = kTokens * kHidden;
  std::vector<std::vector<float>> in(3, std::vector<float>(kCount, 1.0f)), out(3, std::vector<float>(kCount, 5.0f)),
      norm = out;
  const std::vector<float> gamma(kHidden, 1.0f);
  auto launch = [&](int r) {
    return comm.fusedLamportF32LaunchOf(r, in[r].data(), out[r].data(), norm[r].data(), gamma.data(), kTokens, kHidden);
  };
  runConcurrently({launch(0), launch(1)});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(comm.status(r)[gpu::kStatusCode], symmarTimeout) << "rank " << r;
    EXPECT_EQ(comm.status(r)[gpu::kStatusPeer], 2) << "rank " << r << " names the rank that never wrote";
  }
  runConcurrently({launch(0), launch(1), launch(2)});
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_TRUE(std::isnan(out[r][i]) && std::isnan(norm[r][i])) << "rank " << r << " element " << i;
    }
  }
}

// The call number that the header carries is 32 bits and wraps; the buffer ring must not follow it
// (2^32 is no multiple of 3: call 2^32-1 and the wrapped call 0 would share a buffer, and the
// latter would sum the former's uncleared vectors). Every rank starts 4 calls before the wrap;
// every call has different data, barrier calls come in between, and fused lamport calls (which
// share the ring and the numbering) take every fifth turn.
TEST(LamportProtocol, CallNumberWrapsPastTwoToThe32) {
  EmuOptions o;
  o.world = 3;
  o.multicast = false;
  o.timeout_ms = 5000;
  EmuComm comm(o);
  for (int r = 0; r < 3; ++r) comm.state(r).lamport_calls = UINT32_MAX - 3;
  CallRunner run(comm);
  int lamport = 0;
  for (int n = 0; n < 12; ++n) {
    if (n % 5 == 1) {
      ASSERT_EQ(fusedLamportCall(comm, n), "") << "call " << n << " (fused)";
      ++lamport;
      continue;
    }
    const symmarAlgo_t algo = n % 4 == 3 ? symmarAlgoTwoShot : symmarAlgoLamport;
    ASSERT_EQ(run.call(algo, symmarFloat32, symmarSum, n % 2 ? 1000 : 37, false, n), "") << "call " << n;
    lamport += algo == symmarAlgoLamport;
  }
  EXPECT_EQ(comm.state(0).lamport_calls, static_cast<uint32_t>(UINT32_MAX - 3 + lamport));
}

// Rank 1 calls with twice rank 0's count: no rank may return success for that call.
TEST(LamportFailure, AMismatchedCallFailsOnEveryRank) {
  EmuOptions o;
  o.world = 2;
  o.timeout_ms = 300;
  o.multicast = false;
  EmuComm comm(o);
  std::vector<std::vector<char>> buf(2, std::vector<char>(8192));
  const auto args = [&](int r, size_t count) {
    return gpu::makeKernelArgs(comm.context(r), buf[static_cast<size_t>(r)].data(), buf[static_cast<size_t>(r)].data(),
                               count, symmarFloat32, symmarAlgoLamport,
                               callSignature(count, symmarFloat32, symmarSum, symmarAlgoLamport));
  };
  const gpu::KernelArgs a0 = args(0, 500), a1 = args(1, 1000);
  const void* k = gpu::kernelOf(symmarAlgoLamport, symmarFloat32, symmarSum, false);
  runConcurrently({Launch{k, 1, a0, nullptr, gpu::kLamportThreads}, Launch{k, 1, a1, nullptr, gpu::kLamportThreads}});
  EXPECT_NE(comm.status(0)[gpu::kStatusCode], 0) << "rank 0 saw rank 1's header: another count";
  EXPECT_NE(comm.status(1)[gpu::kStatusCode], 0) << "rank 1 saw rank 0's header (or its failure)";
  EXPECT_TRUE(comm.status(0)[gpu::kStatusReason] == gpu::kReasonCallMismatch || comm.status(1)[gpu::kStatusReason] == gpu::kReasonCallMismatch);
}

// The fused call without a fused form runs its allreduce first, and where lamport serves that
// allreduce, its header must carry the fused call's signature (hidden and the FP8 output in it),
// not a plain allreduce's of the same count: a rank making the fused call and a peer making a
// plain allreduce of as many elements must both fail, not sum each other's data.
TEST(LamportFailure, TheFusedCallsAllReduceDoesNotPairWithAPlainOne) {
  EmuOptions o;
  o.world = 2;
  o.timeout_ms = 300;
  o.multicast = false;
  EmuComm comm(o);
  constexpr size_t kTokens = 4, kHidden = 128, kCount = kTokens * kHidden;
  std::vector<std::vector<char>> buf(2, std::vector<char>(kCount * 4));
  AddRmsNormCall fused{};
  fused.tokens = kTokens;
  fused.hidden = kHidden;
  fused.dtype = symmarFloat32;
  const uint64_t signatures[2] = {callSignature(fused, symmarAlgoAuto),
                                  callSignature(kCount, symmarFloat32, symmarSum, symmarAlgoLamport)};
  ASSERT_NE(signatures[0], signatures[1]);
  std::vector<Launch> launches;
  for (int r = 0; r < 2; ++r) {
    char* p = buf[static_cast<size_t>(r)].data();
    launches.push_back(Launch{gpu::kernelOf(symmarAlgoLamport, symmarFloat32, symmarSum, false), 1,
                              gpu::makeKernelArgs(comm.context(r), p, p, kCount, symmarFloat32, symmarAlgoLamport,
                                                  signatures[r]),
                              nullptr, gpu::kLamportThreads});
  }
  runConcurrently(launches);
  // Each rank sees the other's header first, or (where the peer already failed) its failed word.
  for (int r = 0; r < 2; ++r) EXPECT_NE(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r << " paired";
  EXPECT_TRUE(comm.status(0)[gpu::kStatusReason] == gpu::kReasonCallMismatch ||
              comm.status(1)[gpu::kStatusReason] == gpu::kReasonCallMismatch);
}

// The fused call's lamport form pairs only with the same fused call: rank 0 runs it (4 x 128 f32)
// while rank 1 runs a plain lamport allreduce of the same 512 elements, or the fused lamport form of
// another shape with the same elements (2 x 256). The slots fill alike; only the header tells the
// calls apart, and both ranks must fail.
TEST(LamportFailure, AFusedLamportCallPairsOnlyWithTheSameFusedCall) {
  constexpr size_t kCount = 512;
  for (bool peer_fused : {false, true}) {
    EmuOptions o;
    o.world = 2;
    o.timeout_ms = 300;
    o.multicast = false;
    EmuComm comm(o);
    std::vector<std::vector<float>> in(2, std::vector<float>(kCount, 1.0f)), out = in, norm = in;
    const std::vector<float> gamma(256, 1.0f);
    std::vector<Launch> launches;
    for (int r = 0; r < 2; ++r) {
      const size_t hidden = r == 0 ? 128 : 256;
      if (r == 0 || peer_fused) {
        launches.push_back(comm.fusedLamportF32LaunchOf(r, in[r].data(), out[r].data(), norm[r].data(), gamma.data(),
                                                        kCount / hidden, hidden));
      } else {
        EmuCall plain{symmarAlgoLamport, symmarFloat32, symmarSum, kCount, {nullptr, in[1].data()}, {nullptr, out[1].data()}};
        launches.push_back(comm.launchOf(r, plain));
      }
      ASSERT_GT(launches.back().blocks, 0);
    }
    runConcurrently(launches);
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r << " paired (peer fused: " << peer_fused << ")";
    }
    EXPECT_TRUE(comm.status(0)[gpu::kStatusReason] == gpu::kReasonCallMismatch ||
                comm.status(1)[gpu::kStatusReason] == gpu::kReasonCallMismatch);
  }
}

// Programmatic dependent launch: the kernels start while "the previous grid" still writes their
// input, and must wait for it before reading any. Inputs are written late, then the gate opens; a
// read before the wait would see the stale bytes (a wrong sum, and a race ThreadSanitizer reports).
TEST(Pdl, EveryKernelWaitsForTheGridBeforeReadingInput) {
  for (symmarAlgo_t algo : {symmarAlgoLamport, symmarAlgoOneShot, symmarAlgoTwoShot}) {
    EmuOptions o;
    o.world = 3;
    o.multicast = false;
    EmuComm comm(o);
    constexpr size_t kCount = 3000;
    std::vector<std::vector<char>> send(3, std::vector<char>(kCount * 4, 0x7f)), recv = send;
    EmuCall c{algo, symmarFloat32, symmarSum, kCount, {}, {}};
    for (int r = 0; r < 3; ++r) {
      c.send.push_back(send[static_cast<size_t>(r)].data());
      c.recv.push_back(recv[static_cast<size_t>(r)].data());
    }
    setGridDependency(true);
    std::thread producer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (int r = 0; r < 3; ++r) fillInput(symmarFloat32, send[static_cast<size_t>(r)].data(), kCount, r, 9);
      openGridDependency();
    });
    ASSERT_TRUE(comm.run(c));
    producer.join();
    for (int r = 0; r < 3; ++r) ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0);
    EXPECT_EQ(checkOutputs(symmarFloat32, symmarSum, kCount, 3, 9, c.recv), "") << symmarAlgoName(algo);
  }
}

}  // namespace
}  // namespace emu
}  // namespace symmar

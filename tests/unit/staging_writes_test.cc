// Plain or streaming stores into staging (host/staging_writes.h): the choice by hand, and every
// host collective that stages (allreduce one-shot and two-shot, reduce-scatter, all-gather, the fused
// call) streaming every staging write, against the float64 reference.
#include "host/staging_writes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/reference.h"
#include "host_call_checks.h"
#include "symmar/symmar.h"

namespace {

using symmar::StagingWrites;

TEST(StagingWrites, PlainUntilTwoTimedWritesInARowRunSlowThenStreamsForAWhile) {
  StagingWrites w;
  EXPECT_FALSE(w.streams(1 << 20));
  EXPECT_FALSE(w.times(4095)) << "small writes are not timed";
  EXPECT_TRUE(w.times(4096));
  w.afterPlain(1 << 20, 100000);  // 10.5 bytes a ns: fast
  EXPECT_FALSE(w.streams(1 << 20));
  w.afterPlain(131072, 32768);  // exactly 4 bytes a ns: not slow
  w.afterPlain(131072, 32768);
  EXPECT_FALSE(w.streams(1 << 20));
  w.afterPlain(131072, 32769);  // just under 4 bytes a ns: slow, but alone
  EXPECT_FALSE(w.streams(1 << 20)) << "one slow write is a moment, not the state";
  w.afterPlain(1 << 20, 100000);  // a fast one between: the count starts again
  w.afterPlain(131072, 32769);
  EXPECT_FALSE(w.streams(1 << 20));
  w.afterPlain(131072, 32769);  // the second slow one in a row
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(w.streams(1 << 20)) << "streamed write " << i;
    EXPECT_FALSE(w.streams(4095)) << "small writes stay plain";
    w.afterStreamed();
  }
  EXPECT_FALSE(w.streams(1 << 20)) << "after 64 streamed writes plain stores are tried again";
  w.afterPlain(1 << 20, 1000000);  // 1 byte a ns: the try is slow, so the state persists
  EXPECT_TRUE(w.streams(1 << 20)) << "a slow try streams again at once";
  for (uint32_t i = 0; i < 128; ++i) w.afterStreamed();
  w.afterPlain(1 << 20, 100000);  // this try is fast: plain again, and one slow write is a moment again
  w.afterPlain(1 << 20, 1000000);
  EXPECT_FALSE(w.streams(1 << 20));
}

// The number of streamed writes w makes before it tries plain stores again (at most `limit`).
uint32_t streamingRun(StagingWrites& w, uint32_t limit) {
  uint32_t n = 0;
  for (; n < limit && w.streams(1 << 20); ++n) w.afterStreamed();
  return n;
}

TEST(StagingWrites, EachSlowTryDoublesTheStreamingRunUpTo1024AndAFastWriteStartsOver) {
  StagingWrites w;
  w.afterPlain(1 << 20, 1000000);
  w.afterPlain(1 << 20, 1000000);
  EXPECT_EQ(streamingRun(w, 5000), 64u);
  for (uint32_t want : {128u, 256u, 512u, 1024u, 1024u, 1024u}) {
    w.afterPlain(1 << 20, 1000000);  // the try is slow
    EXPECT_EQ(streamingRun(w, 5000), want);
  }
  w.afterPlain(1 << 20, 100000);  // the try is fast: plain stores from here
  EXPECT_FALSE(w.streams(1 << 20));
  w.afterPlain(1 << 20, 1000000);
  w.afterPlain(1 << 20, 1000000);
  EXPECT_EQ(streamingRun(w, 5000), 64u) << "after a fast write the next run is the first one's length again";
  w.afterPlain(1 << 20, 1000000);
  EXPECT_EQ(streamingRun(w, 5000), 128u);
}

TEST(StagingWrites, FixedModesNeitherTimeNorChange) {
  StagingWrites plain(StagingWrites::Mode::kPlain), stream(StagingWrites::Mode::kStream);
  EXPECT_FALSE(plain.times(1 << 20));
  EXPECT_FALSE(stream.times(1 << 20));
  plain.afterPlain(1 << 20, 1u << 30);
  EXPECT_FALSE(plain.streams(1 << 20));
  for (size_t bytes : {size_t(64), size_t(1) << 20}) EXPECT_TRUE(stream.streams(bytes));
  for (int i = 0; i < 100; ++i) stream.afterStreamed();
  EXPECT_TRUE(stream.streams(1 << 20));
}

// One-shot and two-shot calls of every 16- and 32-bit float dtype with every staging write
// streamed: sizes below, at and above the timed size, over two chunks (1 MiB each), buffers one
// element past their vector alignment (the streamed copy's unaligned head and tail), in place and not.
int streamedCalls(symmarComm_t comm, int rank, int world) {
  int wrong = 0, call = 0;
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarBfloat16, symmarFloat16}) {
      for (size_t count : {size_t(1000), size_t(8191), size_t(65537), size_t(300001), size_t(600003)}) {
        for (bool in_place : {false, true}) {
          const size_t elem = testref::elementSize(dt);
          std::vector<double> send_words(count * elem / 8 + 2), recv_words(send_words.size());
          char* send = reinterpret_cast<char*>(send_words.data()) + elem;
          char* recv = in_place ? send : reinterpret_cast<char*>(recv_words.data()) + elem;
          testref::fillSmallInts(dt, send, count, rank, call);
          if (symmarAllReduceAlgo(send, recv, count, dt, symmarSum, algo, comm, nullptr) != symmarSuccess) {
            fprintf(stderr, "rank %d call %d failed: %s\n", rank, call, symmarGetLastError(comm));
            return wrong + 1;
          }
          for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int r = 0; r < world; ++r) want += testref::smallIntInput(r, i, call);
            if (testref::loadElement(recv, dt, i) != want) {
              fprintf(stderr, "rank %d call %d (dtype %d, %zu): element %zu is %g, not %g\n", rank, call, dt, count, i,
                      testref::loadElement(recv, dt, i), want);
              ++wrong;
              break;
            }
          }
          ++call;
        }
      }
    }
  }
  return wrong;
}

TEST(StagingWrites, CallsThatStreamEveryStagingWriteMatchTheReference) {
  setenv("SYMMAR_HOST_STREAM", "1", 1);
  for (int world : {2, 3}) {
    const std::vector<int> errors = hostcalls::onThreadRanks(
        world, [world](symmarComm_t comm, int r) { return streamedCalls(comm, r, world); });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r;
  }
  unsetenv("SYMMAR_HOST_STREAM");
}

TEST(StagingWrites, OtherCollectivesThatStreamEveryStagingWriteMatchTheReference) {
  // The reduce-scatter's and all-gather's staged blocks and the fused call's staged rows, streamed;
  // the all-gather stages every block (no reads of the peers' processes).
  setenv("SYMMAR_HOST_STREAM", "1", 1);
  setenv("SYMMAR_HOST_CMA", "0", 1);
  for (int world : {2, 3}) {
    const std::vector<int> errors = hostcalls::onThreadRanks(world, [world](symmarComm_t comm, int r) {
      return hostcalls::scatterGatherCalls(comm, r, world, 2) + hostcalls::fusedCalls(comm, r, world, 2);
    });
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "world " << world << " rank " << r;
  }
  unsetenv("SYMMAR_HOST_CMA");
  unsetenv("SYMMAR_HOST_STREAM");
}

}  // namespace

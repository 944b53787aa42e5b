// The shared schedule: slices cover every element exactly once, stay in bounds, start on vector
// boundaries, and chunks never exceed a staging half.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/schedule.h"

using namespace symmar::sched;

namespace {

void checkCover(size_t count, int parts, size_t vec, size_t base) {
  std::vector<int> hits(count, 0);
  size_t expect_begin = base;
  for (int p = 0; p < parts; ++p) {
    Range r = splitRange(base, count, parts, p, vec);
    ASSERT_LE(r.begin, r.end);
    ASSERT_EQ(r.begin, expect_begin) << "parts must be contiguous";
    ASSERT_LE(r.end, base + count);
    if (r.size() > 0) {
      ASSERT_EQ((r.begin - base) % vec, 0u) << "part starts off a vector boundary";
    }
    if (r.end != base + count) {
      ASSERT_EQ((r.end - base) % vec, 0u);
    }
    for (size_t i = r.begin; i < r.end; ++i) ++hits[i - base];
    expect_begin = r.end;
  }
  ASSERT_EQ(expect_begin, base + count);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(hits[i], 1) << "element " << i;
}

}  // namespace

TEST(Schedule, RankSlicesCoverEveryElementOnce) {
  for (size_t elem : {2u, 4u, 8u}) {
    const size_t vec = vecElems(elem);
    for (int world = 1; world <= 8; ++world) {
      for (size_t count = 0; count <= 10000; count += (count < 300 ? 1 : 37)) {
        checkCover(count, world, vec, 0);
        if (HasFatalFailure()) FAIL() << "elem " << elem << " world " << world << " count " << count;
      }
    }
  }
}

TEST(Schedule, SlicesAreBalancedToOneVector) {
  for (int world = 1; world <= 8; ++world) {
    const size_t count = 1000003, vec = 4;
    size_t lo = SIZE_MAX, hi = 0;
    for (int r = 0; r < world; ++r) {
      size_t n = rankSlice(count, world, r, vec).size();
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    EXPECT_LT(hi - lo, 2 * vec) << world << ": one vector apart, plus the partial last vector";
  }
}

TEST(Schedule, HugeCountsStayInBounds) {
  for (size_t count : {size_t(1) << 33, (size_t(1) << 40) + 3, size_t(1) << 50}) {
    for (int world : {2, 3, 7, 8}) {
      size_t total = 0;
      for (int r = 0; r < world; ++r) {
        Range s = rankSlice(count, world, r, 8);
        EXPECT_LE(s.end, count);
        total += s.size();
      }
      EXPECT_EQ(total, count);
    }
  }
}

TEST(Schedule, BlockRangesPartitionASlice) {
  for (int world = 1; world <= 8; ++world) {
    for (size_t count : {size_t(0), size_t(1), size_t(17), size_t(4099), size_t(100003)}) {
      for (int r = 0; r < world; ++r) {
        Range slice = rankSlice(count, world, r, 8);
        for (int nblocks : {1, 3, 64}) {
          size_t cursor = slice.begin;
          for (int b = 0; b < nblocks; ++b) {
            Range br = blockRange(slice, b, nblocks, 8);
            ASSERT_EQ(br.begin, cursor);
            if (br.size() > 0) {
              ASSERT_EQ(br.begin % 8, 0u);
            }
            size_t body = vecBodyEnd(br, 8);
            ASSERT_LE(body, br.end);
            ASSERT_LT(br.end - body, 8u) << "tail shorter than a vector";
            ASSERT_EQ((body - br.begin) % 8, 0u);
            cursor = br.end;
          }
          ASSERT_EQ(cursor, slice.end);
        }
      }
    }
  }
}

TEST(Schedule, ChunksNeverExceedAStagingHalf) {
  for (size_t staging : {size_t(4096), size_t(65536), size_t(100000), size_t(32) << 20}) {
    for (size_t elem : {2u, 4u, 8u}) {
      for (int world = 1; world <= 8; ++world) {
        size_t chunk = chunkElems(staging, elem, world);
        ASSERT_GT(chunk, 0u);
        ASSERT_LE(chunk * elem, stagingHalfBytes(staging));
        ASSERT_EQ(chunk % (vecElems(elem) * world), 0u);
        ASSERT_LE(stagingHalfOffset(staging, 1) + stagingHalfBytes(staging), staging);
        for (size_t count : {size_t(1), chunk - 1, chunk, chunk + 1, 5 * chunk + 3}) {
          size_t n = numChunks(count, chunk), covered = 0;
          for (size_t k = 0; k < n; ++k) {
            Range r = chunkRange(count, chunk, k);
            ASSERT_EQ(r.begin, covered);
            ASSERT_LE(r.size(), chunk);
            covered = r.end;
          }
          ASSERT_EQ(covered, count);
        }
      }
    }
  }
  EXPECT_EQ(numChunks(0, 128), 0u);
  EXPECT_EQ(chunkElems(64, 8, 8), 0u) << "too small a staging buffer is reported as 0";
}

TEST(Schedule, FlagsNeverShareALine) {
  // Worked by hand: each block owns two 128-byte flags, start then end, blocks in order. The pad
  // layout is shared by every rank and the kernels, so it is pinned, not recomputed.
  EXPECT_EQ(flagOffset(0, kSlotStart), 0u);
  EXPECT_EQ(flagOffset(0, kSlotEnd), 128u);
  EXPECT_EQ(flagOffset(1, kSlotStart), 256u);
  EXPECT_EQ(flagOffset(1, kSlotEnd), 384u);
  EXPECT_EQ(flagOffset(63, kSlotStart), 16128u);
  EXPECT_EQ(flagOffset(63, kSlotEnd), 16256u);
  EXPECT_EQ(kSignalPadBytes, 16384u) << "64 blocks x 2 slots x 128 bytes";
  // And as a property of every flag: a GPU cache line is 128 bytes, so flags sit on line starts,
  // no two share a line, and the last line ends inside the pad.
  constexpr size_t kLine = 128;
  std::vector<size_t> offsets;
  for (int b = 0; b < kMaxBlocks; ++b) {
    for (int s = 0; s < kBarrierSlots; ++s) offsets.push_back(flagOffset(b, s));
  }
  std::sort(offsets.begin(), offsets.end());
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i] % kLine, 0u) << offsets[i];
    if (i > 0) {
      EXPECT_GE(offsets[i] - offsets[i - 1], kLine) << offsets[i - 1] << " and " << offsets[i];
    }
  }
  EXPECT_LE(offsets.back() + kLine, kSignalPadBytes);
}

TEST(Schedule, EpochsCompareAcrossWrap) {
  uint32_t e = 0xfffffffeu;
  EXPECT_TRUE(epochReached(e, e));
  uint32_t next = nextEpoch(nextEpoch(e));
  EXPECT_EQ(next, 0u);
  EXPECT_TRUE(epochReached(next, e));
  EXPECT_FALSE(epochReached(e, next));
  EXPECT_TRUE(epochReached(5, 0xffffff00u));
  EXPECT_FALSE(epochReached(0xffffff00u, 5));
}

// Literal row sizes, so a change to the layout is a deliberate one: the one-shot stages rows back to
// back, the two-shot pads each row (input and published sums) to 16 bytes; an FP8 output takes no
// staging in either form. The host's two-shot publishes [residual | norm | fp8] parts instead.
TEST(Schedule, FusedRowsFillAStagingHalf) {
  EXPECT_EQ(fusedRowBytes(7, 2, false), 14u) << "the one-shot stages input rows only";
  EXPECT_EQ(fusedRowBytes(7, 2, true), 16u);
  EXPECT_EQ(fusedRowBytes(8, 2, true), 16u);
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 0, 2, true), 0u) << "no division by an empty row";
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 8192, 4, false), 1u) << "one row fills a half";
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 8191, 4, true), 1u) << "32764 bytes padded to 32768 fill it too";
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 8193, 4, false), 0u) << "a row does not fit";
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 7, 2, false), 2340u);
  EXPECT_EQ(fusedRowsPerChunk(64 << 10, 7, 2, true), 2048u);
  EXPECT_EQ(fusedPartBytes(14), 16u);
  EXPECT_EQ(fusedPartBytes(16), 16u);
  EXPECT_EQ(hostFusedPublishedRowBytes(7, 2, true), 48u) << "residual, norm and fp8 parts of 16 bytes";
  EXPECT_EQ(hostFusedPublishedRowBytes(7, 2, false), 32u);
  EXPECT_EQ(hostFusedPublishedRowBytes(8192, 4, false), 65536u);
  for (size_t staging : {size_t{64} << 10, size_t{1} << 20, size_t{3} << 20}) {
    const size_t half = stagingHalfBytes(staging);
    for (bool two_shot : {false, true}) {
      const size_t rows = fusedRowsPerChunk(staging, 7168, 2, two_shot);
      const size_t row = fusedRowBytes(7168, 2, two_shot);
      EXPECT_LE(rows * row, half);
      EXPECT_GT((rows + 1) * row, half);
    }
  }
}

#include <gtest/gtest.h>

#include "core/symmetric_arena.h"

using symmar::SymmetricArena;

// Ranks never exchange offsets before using them: each must follow from the call sequence alone.
// The expected offsets are worked by hand (sizes round up to 256 bytes, first fit from offset 0).
TEST(Arena, OffsetsFollowFromTheSequenceAlone) {
  SymmetricArena a(1 << 20);
  size_t off = 0;
  ASSERT_TRUE(a.allocate(100, &off));
  EXPECT_EQ(off, 0u) << "100 bytes take [0, 256)";
  ASSERT_TRUE(a.allocate(4096, &off));
  EXPECT_EQ(off, 256u) << "4096 bytes take [256, 4352)";
  ASSERT_TRUE(a.allocate(1, &off));
  EXPECT_EQ(off, 4352u) << "1 byte takes [4352, 4608)";
  ASSERT_TRUE(a.allocate(300000, &off));
  EXPECT_EQ(off, 4608u) << "300000 bytes round to 300032: [4608, 304640)";
  EXPECT_EQ(a.used(), 304640u);
  ASSERT_TRUE(a.release(256));
  ASSERT_TRUE(a.allocate(512, &off));
  EXPECT_EQ(off, 256u) << "first fit: the hole [256, 4352) left by the 4096-byte block";
  ASSERT_TRUE(a.allocate(4000, &off));
  EXPECT_EQ(off, 304640u) << "4000 bytes round to 4096, more than the 3584 left in the hole";
  EXPECT_EQ(a.used(), 304640u - 4096u + 512u + 4096u);
}

TEST(Arena, FirstFitReusesHolesAndRejectsOverflow) {
  SymmetricArena a(4096);
  size_t x, y, z;
  ASSERT_TRUE(a.allocate(1000, &x));
  ASSERT_TRUE(a.allocate(1000, &y));
  EXPECT_EQ(x, 0u);
  EXPECT_EQ(y, 1024u);
  ASSERT_TRUE(a.release(x));
  EXPECT_FALSE(a.release(x)) << "double free is refused";
  ASSERT_TRUE(a.allocate(200, &z));
  EXPECT_EQ(z, 0u);
  EXPECT_FALSE(a.allocate(4096, &z)) << "no hole is large enough";
  EXPECT_FALSE(a.allocate(0, &z));
  size_t block = 0;
  EXPECT_TRUE(a.contains(1030, 10, &block));
  EXPECT_EQ(block, 1024u);
  EXPECT_FALSE(a.contains(1030, 2000, &block)) << "range runs past the block";
  EXPECT_FALSE(a.contains(3000, 1, &block));
}

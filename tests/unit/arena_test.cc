#include <gtest/gtest.h>

#include "core/symmetric_arena.h"

using symmar::SymmetricArena;

TEST(Arena, SameSequenceGivesSameOffsets) {
  SymmetricArena a(1 << 20), b(1 << 20);
  size_t oa = 0, ob = 0;
  for (size_t bytes : {100u, 4096u, 1u, 300000u}) {
    ASSERT_TRUE(a.allocate(bytes, &oa));
    ASSERT_TRUE(b.allocate(bytes, &ob));
    EXPECT_EQ(oa, ob);
    EXPECT_EQ(oa % SymmetricArena::kAlign, 0u);
  }
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

// core/recent_ids.h: the bounded single-use record of unique ids.
#include "core/recent_ids.h"

#include <gtest/gtest.h>

namespace symmar {
namespace {

TEST(RecentIds, ARepeatIsRefusedWhileRecentAndTheOldestIsForgotten) {
  RecentIds ids(3);
  EXPECT_TRUE(ids.insert(10));
  EXPECT_FALSE(ids.insert(10)) << "a repeat";
  EXPECT_TRUE(ids.insert(11));
  EXPECT_TRUE(ids.insert(12));
  EXPECT_TRUE(ids.insert(13)) << "a fourth id: 10 is forgotten";
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_FALSE(ids.contains(10));
  EXPECT_TRUE(ids.contains(11));
  EXPECT_FALSE(ids.insert(12)) << "still recent";
  EXPECT_TRUE(ids.insert(10)) << "forgotten: taken again, and 11 goes";
  EXPECT_FALSE(ids.contains(11));
  EXPECT_EQ(ids.size(), 3u);
}

TEST(RecentIds, AMillionIdsHoldOnlyTheCapacity) {
  RecentIds ids(1024);
  for (uint64_t i = 0; i < 1000000; ++i) ASSERT_TRUE(ids.insert(i * 0x9e3779b97f4a7c15ull));
  EXPECT_EQ(ids.size(), 1024u);
  EXPECT_TRUE(ids.contains(999999 * 0x9e3779b97f4a7c15ull));
  EXPECT_FALSE(ids.contains(0));
}

}  // namespace
}  // namespace symmar

// The L2 size read from Linux's cache listing (what the 16-bit blocked reduction sizes itself by
// where glibc's sysconf gives 0, as on aarch64). Each test writes a listing of its own, laid out as
// /sys/devices/system/cpu/cpu0/cache is, with sizes as the kernel prints them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "host/host_reduce.h"

namespace {

struct CacheEntry {
  const char* level;
  const char* type;
  const char* size;
};

// A cache listing in a temporary directory, removed when the test ends.
class CacheListing {
 public:
  explicit CacheListing(const std::vector<CacheEntry>& entries) : entries_(entries.size()) {
    char name[] = "/tmp/symmar_cache_XXXXXX";
    EXPECT_NE(mkdtemp(name), nullptr);
    dir_ = name;
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string entry = dir_ + "/index" + std::to_string(i);
      EXPECT_EQ(mkdir(entry.c_str(), 0700), 0);
      write(entry + "/level", entries[i].level);
      write(entry + "/type", entries[i].type);
      write(entry + "/size", entries[i].size);
    }
  }
  ~CacheListing() {
    for (const std::string& f : files_) unlink(f.c_str());
    for (size_t i = 0; i < entries_; ++i) rmdir((dir_ + "/index" + std::to_string(i)).c_str());
    rmdir(dir_.c_str());
  }
  const char* dir() const { return dir_.c_str(); }

 private:
  void write(const std::string& path, const char* text) {
    if (text == nullptr) return;  // the entry lacks this file
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "%s\n", text);
    std::fclose(f);
    files_.push_back(path);
  }
  size_t entries_;
  std::string dir_;
  std::vector<std::string> files_;
};

TEST(CacheSize, ReadsTheLevelTwoEntryOfAnArmServerListing) {
  // Neoverse V1 (Graviton 3): 64 KiB L1 data and instruction, 1 MiB L2 a core, 32 MiB L3.
  CacheListing listing({{"1", "Data", "64K"}, {"1", "Instruction", "64K"}, {"2", "Unified", "1024K"},
                        {"3", "Unified", "32768K"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(listing.dir()), size_t{1} << 20);
}

TEST(CacheSize, TakesMegabyteSizesAndDataOnlyEntries) {
  CacheListing mega({{"1", "Data", "48K"}, {"2", "Unified", "2M"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(mega.dir()), size_t{2} << 20);
  CacheListing split({{"2", "Instruction", "256K"}, {"2", "Data", "512K"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(split.dir()), size_t{512} << 10);
}

TEST(CacheSize, UnknownWhereTheListingSaysNothingUsable) {
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs("/nonexistent/symmar/cache"), 0u);
  CacheListing no_l2({{"1", "Data", "32K"}, {"3", "Unified", "8192K"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(no_l2.dir()), 0u);
  CacheListing odd_unit({{"2", "Unified", "1G"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(odd_unit.dir()), 0u);
  CacheListing not_a_number({{"2", "Unified", "big"}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(not_a_number.dir()), 0u);
  CacheListing no_size({{"2", "Unified", nullptr}});
  EXPECT_EQ(symmar::l2CacheBytesFromSysfs(no_size.dir()), 0u);
}

TEST(CacheSize, ThisMachinesListingAgreesWithSysconfWhereBothAnswer) {
  const long from_libc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t from_sysfs = symmar::l2CacheBytesFromSysfs("/sys/devices/system/cpu/cpu0/cache");
  if (from_libc <= 0 || from_sysfs == 0)
    GTEST_SKIP() << "sysconf gives " << from_libc << " and the listing " << from_sysfs << " bytes: nothing to compare";
  EXPECT_EQ(from_sysfs, static_cast<size_t>(from_libc));
}

}  // namespace

// The environment registry and the logger.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "core/env.h"
#include "core/log.h"
#include "core/names.h"

using namespace symmar;

TEST(Env, RegistryDocumentsEveryVariable) {
  size_t n = 0;
  const EnvVarInfo* vars = envRegistry(&n);
  std::set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    names.insert(vars[i].name);
    EXPECT_EQ(std::string(vars[i].name).rfind("SYMMAR_", 0), 0u);
    EXPECT_GT(strlen(vars[i].values), 0u);
    EXPECT_GT(strlen(vars[i].default_value), 0u);
    EXPECT_GT(strlen(vars[i].description), 0u);
  }
  EXPECT_EQ(names.size(), n) << "no duplicates";
  for (const char* required : {"SYMMAR_ALGO", "SYMMAR_DISABLE", "SYMMAR_TABLE_FILE", "SYMMAR_DEBUG",
                               "SYMMAR_DEBUG_SUBSYS", "SYMMAR_DEBUG_FILE", "SYMMAR_SOCKET_IFNAME", "SYMMAR_NCCL_LIB"}) {
    EXPECT_EQ(names.count(required), 1u) << required;
  }
}

TEST(Env, UnregisteredNamesAreNotRead) {
  setenv("SYMMAR_NOT_A_VARIABLE", "1", 1);
  EXPECT_EQ(envRaw("SYMMAR_NOT_A_VARIABLE"), nullptr);
  unsetenv("SYMMAR_NOT_A_VARIABLE");
}

TEST(Env, ParseSize) {
  int64_t v = 0;
  EXPECT_TRUE(parseSize("123", &v));
  EXPECT_EQ(v, 123);
  EXPECT_TRUE(parseSize("64K", &v));
  EXPECT_EQ(v, 64 << 10);
  EXPECT_TRUE(parseSize("8m", &v));
  EXPECT_EQ(v, 8 << 20);
  EXPECT_TRUE(parseSize("2G", &v));
  EXPECT_EQ(v, int64_t(2) << 30);
  for (const char* bad : {"", "x", "-1", "12Q", "1KK", "99999999999999999999", "9000000000000G"}) {
    EXPECT_FALSE(parseSize(bad, &v)) << bad;
  }
}

TEST(Env, BadIntegersFallBackToTheDefault) {
  setenv("SYMMAR_TIMEOUT_MS", "soon", 1);
  EXPECT_EQ(envInt("SYMMAR_TIMEOUT_MS", 30000, 1, INT32_MAX), 30000);
  setenv("SYMMAR_TIMEOUT_MS", "0", 1);
  EXPECT_EQ(envInt("SYMMAR_TIMEOUT_MS", 30000, 1, INT32_MAX), 30000) << "out of range";
  setenv("SYMMAR_TIMEOUT_MS", "250", 1);
  EXPECT_EQ(envInt("SYMMAR_TIMEOUT_MS", 30000, 1, INT32_MAX), 250);
  unsetenv("SYMMAR_TIMEOUT_MS");
  EXPECT_EQ(envInt("SYMMAR_TIMEOUT_MS", 30000, 1, INT32_MAX), 30000);
}

TEST(Env, AlgoLists) {
  uint32_t mask = 0;
  EXPECT_TRUE(parseAlgoList("oneshot,nccl", &mask));
  EXPECT_EQ(mask, algoBit(symmarAlgoOneShot) | algoBit(symmarAlgoNccl));
  EXPECT_TRUE(parseAlgoList("", &mask));
  EXPECT_EQ(mask, 0u);
  EXPECT_FALSE(parseAlgoList("oneshot,ring", &mask));
  EXPECT_FALSE(parseAlgoList("auto", &mask)) << "auto cannot be disabled";
}

TEST(Log, FileWithHostAndPidAndLineFormat) {
  std::string pattern = "/tmp/symmar-log-test.%h.%p";
  setenv("SYMMAR_DEBUG", "INFO", 1);
  setenv("SYMMAR_DEBUG_SUBSYS", "PLAN,INIT", 1);
  setenv("SYMMAR_DEBUG_FILE", pattern.c_str(), 1);
  reloadLogConfig();
  setLogRank(3);
  SYMMAR_INFO(kSubsysPlan, "hello %d", 42);
  SYMMAR_INFO(kSubsysBoot, "filtered out");
  SYMMAR_TRACE(kSubsysPlan, "below the level");
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::string path = "/tmp/symmar-log-test." + std::string(host) + "." + std::to_string(getpid());
  unsetenv("SYMMAR_DEBUG");
  unsetenv("SYMMAR_DEBUG_SUBSYS");
  unsetenv("SYMMAR_DEBUG_FILE");
  reloadLogConfig();
  setLogRank(-1);
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::string line, all;
  while (std::getline(in, line)) all += line + "\n";
  std::string prefix = std::string(host) + ":" + std::to_string(getpid()) + ":";
  EXPECT_EQ(all.rfind(prefix, 0), 0u) << all;
  EXPECT_NE(all.find(" [3] symmar INFO hello 42"), std::string::npos) << all;
  EXPECT_EQ(all.find("filtered out"), std::string::npos);
  EXPECT_EQ(all.find("below the level"), std::string::npos);
  unlink(path.c_str());
}

TEST(Log, BadLevelIsIgnoredNotFatal) {
  setenv("SYMMAR_DEBUG", "LOUD", 1);
  reloadLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kWarn, kSubsysAll)) << "default level stays";
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kSubsysAll));
  unsetenv("SYMMAR_DEBUG");
  reloadLogConfig();
}

TEST(Env, IntegrationGuideListsEveryVariable) {
  std::ifstream doc(SYMMAR_SOURCE_DIR "/docs/integration.md");
  ASSERT_TRUE(doc.good());
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  size_t n = 0;
  const EnvVarInfo* vars = envRegistry(&n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NE(text.find(std::string("`") + vars[i].name + "`"), std::string::npos)
        << vars[i].name << " is registered but missing from docs/integration.md";
  }
}

// Each numeric variable's default and range live in its registry row; a value outside the range
// falls back to the default (hand-worked values from the documented ranges).
TEST(Env, NumbersTakeDefaultAndRangeFromTheRegistry) {
  size_t n = 0;
  const EnvVarInfo* vars = envRegistry(&n);
  for (size_t i = 0; i < n; ++i) {
    if (vars[i].kind == EnvKind::kText) continue;
    EXPECT_LE(vars[i].min, vars[i].def) << vars[i].name;
    EXPECT_LE(vars[i].def, vars[i].max) << vars[i].name;
  }
  unsetenv("SYMMAR_HEAP_BYTES");
  EXPECT_EQ(envNumber("SYMMAR_HEAP_BYTES"), int64_t{256} << 20);
  setenv("SYMMAR_HEAP_BYTES", "64M", 1);
  EXPECT_EQ(envNumber("SYMMAR_HEAP_BYTES"), int64_t{64} << 20);
  setenv("SYMMAR_HEAP_BYTES", "2048G", 1);  // 2 TiB: above the 1 TiB both backends accept
  EXPECT_EQ(envNumber("SYMMAR_HEAP_BYTES"), int64_t{256} << 20);
  unsetenv("SYMMAR_HEAP_BYTES");
  setenv("SYMMAR_STAGING_BYTES", "2K", 1);  // below the 4K minimum: the caller's default stands
  EXPECT_EQ(envNumber("SYMMAR_STAGING_BYTES", int64_t{8} << 20), int64_t{8} << 20);
  setenv("SYMMAR_STAGING_BYTES", "4K", 1);
  EXPECT_EQ(envNumber("SYMMAR_STAGING_BYTES", int64_t{8} << 20), 4096);
  unsetenv("SYMMAR_STAGING_BYTES");
  setenv("SYMMAR_EPOCH_START", "4294967295", 1);
  EXPECT_EQ(envNumber("SYMMAR_EPOCH_START"), 4294967295ll);
  setenv("SYMMAR_EPOCH_START", "4294967296", 1);
  EXPECT_EQ(envNumber("SYMMAR_EPOCH_START"), 0);
  unsetenv("SYMMAR_EPOCH_START");
  EXPECT_EQ(envNumber("SYMMAR_ALGO", 7), 7) << "text variables are not numbers";
}

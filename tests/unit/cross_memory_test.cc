// Letting peers read a rank's process where Yama would refuse them: what the scope file says, and
// when the permission is asked for. Yama's rule itself cannot be switched on from a test (it is a
// kernel setting), so the prctl call is replaced by one that counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "host/cross_memory.h"

namespace {

using symmar::PeerReadPermission;

// A scope file holding `text`, removed when the test ends.
class ScopeFile {
 public:
  explicit ScopeFile(const char* text) {
    char name[] = "/tmp/symmar_yama_scope_XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path_ = name;
    EXPECT_EQ(write(fd, text, std::string(text).size()), static_cast<ssize_t>(std::string(text).size()));
    close(fd);
  }
  ~ScopeFile() { unlink(path_.c_str()); }
  const char* path() const { return path_.c_str(); }

 private:
  std::string path_;
};

TEST(CrossMemory, ReadsYamaScopeFromItsFile) {
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("0\n").path()), 0);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("1\n").path()), 1);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("2\n").path()), 2);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("3").path()), 3);
  // Nothing Yama writes: treated as no Yama, so nothing is asked for.
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("4\n").path()), -1);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("-1\n").path()), -1);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("one\n").path()), -1);
  EXPECT_EQ(symmar::yamaPtraceScope(ScopeFile("").path()), -1);
  EXPECT_EQ(symmar::yamaPtraceScope("/nonexistent/symmar/ptrace_scope"), -1);
}

int g_calls = 0;
int succeeds() { return ++g_calls, 0; }
int fails() { return ++g_calls, errno = EPERM, -1; }

TEST(CrossMemory, AsksForPermissionOnlyUnderScopeOne) {
  struct Case {
    int scope;
    int (*set)();
    PeerReadPermission expected;
    int calls;
  };
  const Case cases[] = {
      {-1, succeeds, PeerReadPermission::kNotNeeded, 0},    // no Yama: the same-user rule only
      {0, succeeds, PeerReadPermission::kNotNeeded, 0},     // any process of the user may read already
      {1, succeeds, PeerReadPermission::kGranted, 1},       // descendants only, unless named: name them
      {1, fails, PeerReadPermission::kRefused, 1},          // the call failed: peers will stage
      {2, succeeds, PeerReadPermission::kNotGrantable, 0},  // CAP_SYS_PTRACE only: no prctl helps
      {3, succeeds, PeerReadPermission::kNotGrantable, 0},  // no attaching at all
  };
  for (const Case& c : cases) {
    g_calls = 0;
    EXPECT_EQ(symmar::letPeersRead(c.scope, c.set), c.expected) << "scope " << c.scope;
    EXPECT_EQ(g_calls, c.calls) << "scope " << c.scope;
  }
}

// The library's own call: accepted where Yama is loaded (its scope file is there), refused with
// EINVAL by a kernel without it.
TEST(CrossMemory, SetPtracerAnyIsAcceptedWhereYamaIsLoaded) {
  const int scope = symmar::yamaPtraceScope();
  errno = 0;
  const int rc = symmar::setPtracerAny();
  if (scope >= 0) {
    EXPECT_EQ(rc, 0) << "Yama scope " << scope << ": " << strerror(errno);
  } else {
    EXPECT_EQ(rc, -1);
    EXPECT_EQ(errno, EINVAL);
  }
}

}  // namespace

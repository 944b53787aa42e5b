#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace symmar {

symmarResult_t Bootstrap::barrier() {
  std::vector<char> bytes(static_cast<size_t>(nranks()), 0);
  return allGather(bytes.data(), 1);
}

ProcessIdentity selfIdentity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string key(host);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot >> boot_id) key += "/" + boot_id;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return ProcessIdentity{h, static_cast<int32_t>(getpid()), 0};
}

}  // namespace symmar

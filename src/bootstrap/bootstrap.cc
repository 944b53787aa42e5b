#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>
#include <cstdint>

#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/hash.h"

namespace symmar {

ProcessIdentity selfIdentity() {
  std::string key;
  if (const char* id = envRaw("SYMMAR_HOST_ID")) {
    key = std::string("host-id/") + id;  // tests pretend several hosts on one machine
  } else {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    key = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string boot_id;
    if (boot >> boot_id) key += "/" + boot_id;
  }
  return ProcessIdentity{fnv1a(key.data(), key.size()), static_cast<int32_t>(getpid()), 0};
}

}  // namespace symmar

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/hash.h"

namespace symmar {

ProcessIdentity selfIdentity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string machine = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot >> boot_id) machine += "/" + boot_id;
  std::string key = machine;
  if (const char* id = envRaw("SYMMAR_HOST_ID")) key = std::string("host-id/") + id;  // pretend several hosts
  ProcessIdentity out{};
  out.host_hash = fnv1a(key.data(), key.size());
  out.machine_hash = fnv1a(machine.data(), machine.size());
  out.pid = static_cast<int32_t>(getpid());
  return out;
}

}  // namespace symmar

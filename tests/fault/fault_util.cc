#include "fault/fault_util.h"

#include <cstdio>
#include <thread>

namespace fault {

symmarComm_t initCpu(const symmarUniqueId& id, int world, int rank, int timeout_ms, symmarResult_t* res) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = timeout_ms;
  cfg.staging_bytes = 256 << 10;
  symmarComm_t comm = nullptr;
  symmarResult_t r = symmarCommInitRank(&comm, world, id, rank, &cfg);
  if (res) *res = r;
  return r == symmarSuccess ? comm : nullptr;
}

namespace {
float inputOf(int rank, int iteration, size_t i) { return static_cast<float>((rank + 1) * ((iteration + i) % 13 + 1)); }
}  // namespace

symmarResult_t checkedAllReduce(symmarComm_t comm, int rank, int world, size_t count, int iteration, bool* wrong,
                                symmarAlgo_t algo) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = inputOf(rank, iteration, i);
  symmarResult_t res =
      symmarAllReduceAlgo(buf.data(), buf.data(), count, symmarFloat32, symmarSum, algo, comm, nullptr);
  *wrong = false;
  if (res != symmarSuccess) return res;
  for (size_t i = 0; i < count; ++i) {
    double ref = 0;
    for (int r = 0; r < world; ++r) ref += inputOf(r, iteration, i);
    if (static_cast<double>(buf[i]) != ref) {
      fprintf(stderr, "rank %d: iteration %d: element %zu = %g, expected %g (returned success)\n", rank, iteration, i,
              static_cast<double>(buf[i]), ref);
      *wrong = true;
      break;
    }
  }
  return res;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace fault

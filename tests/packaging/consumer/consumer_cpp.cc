// C++ consumer: the RAII header from an installed symmar.
#include <cstdio>
#include <vector>

#include <symmar/symmar.hpp>

int main() {
  try {
    symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
    cfg.device = SYMMAR_DEVICE_CPU;
    std::vector<symmar::Comm> comms = symmar::Comm::initAll(1, {SYMMAR_DEVICE_CPU}, &cfg);
    std::vector<int> x{1, 2, 3}, y(3);
    comms[0].allReduce(x.data(), y.data(), x.size(), symmarInt32);
    if (y != x) return 1;
    std::printf("consumer_cpp: ok (rank %d of %d)\n", comms[0].rank(), comms[0].size());
  } catch (const symmar::Error& e) {
    std::fprintf(stderr, "consumer_cpp: %s\n", e.what());
    return 1;
  }
  return 0;
}

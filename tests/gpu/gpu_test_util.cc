#include "gpu_test_util.h"

#include <cstdint>
#include <cstdlib>
#include <thread>

namespace symmar_gpu_test {
namespace {

// Before any CUDA call of the test binary (static initialisation): ranks that share a GPU need
// their kernels resident at once, which the default 8 hardware queues may not give.
const int kConnectionsSet = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

}  // namespace

int gpuCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("no GPU: cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    return 0;
  }
  if (n == 0) *why = "no GPU: no CUDA device";
  return n;
}

LocalWorld::LocalWorld(const std::vector<int>& devices, int timeout_ms, size_t staging_bytes) : devices_(devices) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = devices.empty() ? 0 : devices[0];
  cfg.timeout_ms = timeout_ms;
  cfg.staging_bytes = staging_bytes;
  comms_.assign(devices.size(), nullptr);
  symmarResult_t res = symmarCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data(), &cfg);
  if (res != symmarSuccess) {
    error_ = std::string(symmarGetErrorString(res)) + ": " + symmarGetLastError(nullptr);
    comms_.clear();
    return;
  }
  for (int d : devices) {
    cudaStream_t s = nullptr;
    cudaSetDevice(d);
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      error_ = "cudaStreamCreate failed";
      return;
    }
    streams_.push_back(s);
  }
  ok_ = true;
}

LocalWorld::~LocalWorld() {
  sync();
  for (size_t r = 0; r < streams_.size(); ++r) {
    cudaSetDevice(devices_[r]);
    cudaStreamDestroy(streams_[r]);
  }
  for (symmarComm_t c : comms_) symmarCommDestroy(c);
}

void LocalWorld::parallel(const std::function<void(int)>& fn) const {
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) threads.emplace_back([&fn, r, this] {
    cudaSetDevice(device(r));
    fn(r);
  });
  for (std::thread& t : threads) t.join();
}

cudaError_t LocalWorld::sync() const {
  cudaError_t first = cudaSuccess;
  for (size_t r = 0; r < streams_.size(); ++r) {
    cudaError_t e = cudaStreamSynchronize(streams_[r]);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

std::vector<unsigned char> makeInput(symmarDataType_t t, size_t count, int rank, uint32_t seed) {
  std::vector<unsigned char> buf(count * testref::elementSize(t));
  for (size_t i = 0; i < count; ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(rank) + 1) * 40503u ^ seed;
    h ^= h >> 13;
    testref::storeElement(buf.data(), t, i, static_cast<double>(static_cast<int>(h % 64u) - 32) / 8.0);
  }
  return buf;
}

}  // namespace symmar_gpu_test

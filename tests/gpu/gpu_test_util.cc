#include "gpu_test_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// CUDA's own host conversions (round to nearest even): independent of the library's converters.
uint16_t floatToBf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
float bf16ToFloat(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
float halfToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }
uint16_t floatToHalf(float f) { return __half_as_ushort(__float2half_rn(f)); }

size_t elemSize(symmarDataType_t t) { return t == symmarFloat32 ? 4 : 2; }

std::vector<unsigned char> makeInput(symmarDataType_t t, size_t count, int rank, uint32_t seed) {
  std::vector<unsigned char> buf(count * elemSize(t));
  for (size_t i = 0; i < count; ++i) {
    // Multiples of 1/8 in [-4, 4): exact in bf16 and fp16, and so are sums of up to 8 of them.
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(rank) + 1) * 40503u ^ seed;
    h ^= h >> 13;
    float v = static_cast<float>(static_cast<int>(h % 64u) - 32) / 8.0f;
    if (t == symmarFloat32) std::memcpy(&buf[i * 4], &v, 4);
    else {
      uint16_t b = t == symmarFloat16 ? floatToHalf(v) : floatToBf16(v);
      std::memcpy(&buf[i * 2], &b, 2);
    }
  }
  return buf;
}

double elemAt(symmarDataType_t t, const std::vector<unsigned char>& buf, size_t i) {
  if (t == symmarFloat32) {
    float f;
    std::memcpy(&f, &buf[i * 4], 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, &buf[i * 2], 2);
  return t == symmarFloat16 ? halfToFloat(b) : bf16ToFloat(b);
}

std::vector<double> reference(symmarDataType_t t, symmarRedOp_t op, const std::vector<std::vector<unsigned char>>& in,
                              size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = elemAt(t, in[0], i);
    for (size_t r = 1; r < in.size(); ++r) {
      double v = elemAt(t, in[r], i);
      acc = op == symmarSum ? acc + v : op == symmarMax ? std::max(acc, v) : std::min(acc, v);
    }
    out[i] = acc;
  }
  return out;
}

double tolerance(symmarDataType_t t, double ref, int world) {
  const double eps = t == symmarFloat32 ? 1.2e-7 : t == symmarFloat16 ? 9.8e-4 : 7.9e-3;
  return eps * (std::fabs(ref) + 1.0) * world;
}

}  // namespace symmar_gpu_test

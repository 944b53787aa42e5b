// Helpers of the GPU tests: skipping without a GPU, a local world of comms (one CUDA stream per
// rank) and test data; the float64 reference is common/reference.h.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/reference.h"
#include "symmar/symmar.h"

namespace symmar_gpu_test {

/// Number of usable GPUs; 0 with *why set when there is none (no driver, no device).
int gpuCount(std::string* why);

#define SKIP_WITHOUT_GPU()                                                 \
  do {                                                                     \
    std::string why_;                                                      \
    if (::symmar_gpu_test::gpuCount(&why_) == 0) GTEST_SKIP() << why_;     \
  } while (0)

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call
#define SYMMAR_OK(call) ASSERT_EQ(symmarSuccess, (call)) << #call << ": " << symmarGetLastError(nullptr)

/// nranks comms on the given devices (same device repeated = ranks sharing one GPU), each with its
/// own non-blocking stream. Destroys everything at scope exit.
class LocalWorld {
 public:
  LocalWorld(const std::vector<int>& devices, int timeout_ms, size_t staging_bytes);
  ~LocalWorld();
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int size() const { return static_cast<int>(comms_.size()); }
  symmarComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  cudaStream_t stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  int device(int r) const { return devices_[static_cast<size_t>(r)]; }
  /// Runs fn(rank) on one thread per rank (for collective calls such as symmarMemAlloc).
  void parallel(const std::function<void(int)>& fn) const;
  /// Waits for every rank's stream.
  cudaError_t sync() const;

 private:
  std::vector<int> devices_;
  std::vector<symmarComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  bool ok_ = false;
  std::string error_;
};

/// cudaMalloc for typed pointers (the template overload lives in cuda_runtime.h, for nvcc).
template <typename T>
cudaError_t devAlloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}

/// Host buffer of count elements of dtype (f32/f16/bf16) holding rank r's test input: multiples of
/// 1/8 in [-4, 4), exact in every type, and so are sums of up to 8 of them. Conversions, the float64
/// reference and the tolerances come from common/reference.h (namespace testref).
std::vector<unsigned char> makeInput(symmarDataType_t t, size_t count, int rank, uint32_t seed);

}  // namespace symmar_gpu_test

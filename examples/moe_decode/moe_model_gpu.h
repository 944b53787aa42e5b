// The GPU variant of moe::Model: the same decoder layer (presets, sharding, two allreduces per
// layer) with bf16 weights and activations, fp32 accumulation and an fp32 residual stream.
// GEMMs run through cuBLAS (loaded at run time, cublas_loader.h); the routed experts run as two
// batched GEMMs over (token, k) pairs whose pointer arrays the routing kernel writes on the device,
// so a whole step is stream-ordered without host round trips and can be captured in a CUDA graph.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "cublas_loader.h"
#include "moe_kernels.h"
#include "moe_model.h"

namespace moe {

/// Allreduce (sum) of count bf16 elements from send into recv on stream; false on error.
using GpuAllReduceFn = std::function<bool(const void* send, void* recv, size_t count, cudaStream_t stream)>;

class GpuModel {
 public:
  GpuModel(const Preset& p, int rank, int world, int tokens, unsigned seed);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  /// Allocates weights (random, on the device) and activations on the current device and creates
  /// the cuBLAS handle. partial: a buffer of tokens x hidden bf16 for the allreduce input (e.g. a
  /// symmetric one from symmarMemAlloc, not owned), or null to allocate one. False with *error.
  bool init(const cublas::Api* api, void* partial, std::string* error);
  /// Copies the step's input hidden states [tokens x hidden] (fp32) to the device.
  bool setInput(const std::vector<float>& hidden, std::string* error);
  /// Makes cuBLAS work on stream with the model's own workspace (no allocation while capturing).
  /// Call before capturing enqueueStep.
  bool bindStream(cudaStream_t stream, std::string* error);
  /// Enqueues one step on stream: the hidden states are reset to the input, then every layer runs.
  /// allreduce null: the step without its allreduces (each rank's partial sums are used as they
  /// are), for measuring the allreduce share. Capturable; false with *error on a failed launch.
  bool enqueueStep(cudaStream_t stream, const GpuAllReduceFn* allreduce, std::string* error);
  /// Copies the final hidden states back after the work on stream (synchronises stream).
  bool readHidden(cudaStream_t stream, std::vector<float>* out, std::string* error) const;

  size_t weightBytes() const;
  void* partialBuffer() const { return partial_; }
  void* reducedBuffer() const { return reduced_; }
  size_t allreduceCount() const { return static_cast<size_t>(tokens_) * p_.hidden; }

 private:
  bool layer(cudaStream_t s, const GpuAllReduceFn* allreduce, std::string* error);
  bool check(cudaError_t e, const char* what, std::string* error) const;
  bool checkBlas(cublas::Status st, const char* what, std::string* error) const;
  template <typename T>
  bool alloc(T** p, size_t count, std::string* error);

  Preset p_;
  int rank_, world_, tokens_;
  unsigned seed_;
  int attn_shard_, inter_shard_, attn_offset_;
  const cublas::Api* api_ = nullptr;
  cublas::Handle handle_ = nullptr;
  std::vector<void*> owned_;  // every cudaMalloc of this model
  char* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // Weights (bf16), shapes as in moe::Model.
  gpu::bf16 *w_o_ = nullptr, *w_router_ = nullptr, *w_gate_ = nullptr, *w_up_ = nullptr, *w_down_ = nullptr;
  // Activations.
  float* input_ = nullptr;      // [tokens x hidden] the step's input
  float* x_ = nullptr;          // [tokens x hidden] residual stream
  gpu::bf16* normed_ = nullptr; // [tokens x hidden]
  gpu::bf16* partial_ = nullptr;  // [tokens x hidden] this rank's partial sums (allreduce input)
  gpu::bf16* reduced_ = nullptr;  // [tokens x hidden] allreduce output
  float* logits_ = nullptr;     // [tokens x experts]
  gpu::RouteOutputs route_{};
};

}  // namespace moe

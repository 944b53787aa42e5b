#include "moe_model_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moe {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS workspace (what Hopper/Blackwell want)

uint64_t tensorSeed(unsigned base, int tensor) { return (static_cast<uint64_t>(base) << 8) | static_cast<uint64_t>(tensor); }

}  // namespace

GpuModel::GpuModel(const Preset& p, int rank, int world, int tokens, unsigned seed)
    : p_(p),
      rank_(rank),
      world_(world),
      tokens_(tokens),
      seed_(seed),
      attn_shard_(p.hidden / world + (rank == world - 1 ? p.hidden % world : 0)),
      inter_shard_(std::max(1, p.expert_inter / world)),
      attn_offset_(rank * (p.hidden / world)) {}

GpuModel::~GpuModel() {
  if (handle_ && api_) api_->destroy(handle_);
  for (void* ptr : owned_) cudaFree(ptr);
}

bool GpuModel::check(cudaError_t e, const char* what, std::string* error) const {
  if (e == cudaSuccess) return true;
  *error = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  return false;
}

bool GpuModel::checkBlas(cublas::Status st, const char* what, std::string* error) const {
  if (st == cublas::kSuccess) return true;
  *error = std::string(what) + ": " + cublas::statusText(*api_, st);
  return false;
}

template <typename T>
bool GpuModel::alloc(T** p, size_t count, std::string* error) {
  void* ptr = nullptr;
  const size_t bytes = std::max<size_t>(1, count * sizeof(T));
  if (!check(cudaMalloc(&ptr, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), error)) {
    return false;
  }
  owned_.push_back(ptr);
  *p = static_cast<T*>(ptr);
  return true;
}

size_t GpuModel::weightBytes() const {
  const size_t h = p_.hidden, e = p_.experts, a = attn_shard_, i = inter_shard_;
  return sizeof(gpu::bf16) * (a * h + h * e + 3 * e * h * i);
}

bool GpuModel::init(const cublas::Api* api, void* partial, std::string* error) {
  if (!api) {
    *error = "cuBLAS is not loaded";
    return false;
  }
  if (p_.top_k > gpu::kMaxTopK) {
    *error = "top-k " + std::to_string(p_.top_k) + " exceeds the GPU router's limit of " + std::to_string(gpu::kMaxTopK);
    return false;
  }
  api_ = api;
  const size_t h = p_.hidden, e = p_.experts, a = attn_shard_, i = inter_shard_, t = tokens_;
  const size_t pairs = t * p_.top_k;
  // Weights: the replicated router from the shared seed, the shards from a per-rank seed (as moe::Model).
  const unsigned local = seed_ + 1000u * static_cast<unsigned>(rank_ + 1);
  struct Tensor {
    gpu::bf16** ptr;
    size_t count;
    float scale;
    uint64_t seed;
  } tensors[] = {
      {&w_router_, h * e, 1.0f / std::sqrt(static_cast<float>(h)), tensorSeed(seed_, 0)},
      {&w_o_, a * h, 1.0f / std::sqrt(static_cast<float>(h)), tensorSeed(local, 1)},
      {&w_gate_, e * h * i, 1.0f / std::sqrt(static_cast<float>(h)), tensorSeed(local, 2)},
      {&w_up_, e * h * i, 1.0f / std::sqrt(static_cast<float>(h)), tensorSeed(local, 3)},
      {&w_down_, e * i * h, 1.0f / std::sqrt(static_cast<float>(p_.expert_inter)), tensorSeed(local, 4)},
  };
  for (const Tensor& w : tensors) {
    if (!alloc(w.ptr, w.count, error)) return false;
    if (!check(gpu::initUniform(*w.ptr, w.count, w.scale, w.seed, nullptr), "weight init kernel", error)) return false;
  }
  // Activations and the routing outputs.
  void** ptrs = nullptr;
  if (!alloc(&input_, t * h, error) || !alloc(&x_, t * h, error) || !alloc(&normed_, t * h, error) ||
      !alloc(&reduced_, t * h, error) || !alloc(&logits_, t * e, error) || !alloc(&route_.gate_up, 2 * pairs * i, error) ||
      !alloc(&route_.act, pairs * i, error) || !alloc(&route_.expert_out, pairs * h, error) ||
      !alloc(&route_.expert, pairs, error) || !alloc(&route_.weight, pairs, error) || !alloc(&ptrs, 9 * pairs, error) ||
      !alloc(&workspace_, kWorkspaceBytes, error)) {
    return false;
  }
  workspace_bytes_ = kWorkspaceBytes;
  if (partial) {
    partial_ = static_cast<gpu::bf16*>(partial);
  } else if (!alloc(&partial_, t * h, error)) {
    return false;
  }
  route_.w_gate = w_gate_;
  route_.w_up = w_up_;
  route_.w_down = w_down_;
  route_.normed = normed_;
  route_.gu_a = const_cast<const void**>(ptrs);
  route_.gu_b = const_cast<const void**>(ptrs + 2 * pairs);
  route_.gu_c = ptrs + 4 * pairs;
  route_.dn_a = const_cast<const void**>(ptrs + 6 * pairs);
  route_.dn_b = const_cast<const void**>(ptrs + 7 * pairs);
  route_.dn_c = ptrs + 8 * pairs;
  route_.hidden = p_.hidden;
  route_.inter = inter_shard_;
  if (!check(cudaMemset(partial_, 0, t * h * sizeof(gpu::bf16)), "cudaMemset", error) ||
      !check(cudaDeviceSynchronize(), "weight initialisation", error)) {
    return false;
  }
  return checkBlas(api_->create(&handle_), "cublasCreate", error);
}

bool GpuModel::setInput(const std::vector<float>& hidden, std::string* error) {
  if (hidden.size() != allreduceCount()) {
    *error = "input has the wrong size";
    return false;
  }
  // The step graphs run on a non-blocking stream: the input must have landed before they start.
  return check(cudaMemcpy(input_, hidden.data(), hidden.size() * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy of the input", error) &&
         check(cudaDeviceSynchronize(), "input upload", error);
}

bool GpuModel::bindStream(cudaStream_t stream, std::string* error) {
  // cublasSetStream resets the workspace to the library's pool, so the workspace is set after it.
  return checkBlas(api_->setStream(handle_, stream), "cublasSetStream", error) &&
         checkBlas(api_->setWorkspace(handle_, workspace_, workspace_bytes_), "cublasSetWorkspace", error);
}

bool GpuModel::readHidden(cudaStream_t stream, std::vector<float>* out, std::string* error) const {
  out->resize(allreduceCount());
  return check(cudaMemcpyAsync(out->data(), x_, out->size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync of the hidden states", error) &&
         check(cudaStreamSynchronize(stream), "the decode step", error);
}

bool GpuModel::enqueueStep(cudaStream_t stream, const GpuAllReduceFn* allreduce, std::string* error) {
  if (!check(cudaMemcpyAsync(x_, input_, allreduceCount() * sizeof(float), cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpyAsync of the input", error)) {
    return false;
  }
  for (int l = 0; l < p_.layers; ++l) {
    if (!layer(stream, allreduce, error)) return false;
  }
  return true;
}

// Row-major C[m x n] = A[m x k] * B[k x n] is column-major C^T = B^T * A^T, so every call below
// passes the weight first: cuBLAS (m, n, k) = (columns of C, rows of C, inner).
bool GpuModel::layer(cudaStream_t s, const GpuAllReduceFn* allreduce, std::string* error) {
  using namespace cublas;
  const int h = p_.hidden, E = p_.experts, K = p_.top_k, I = inter_shard_, T = tokens_;
  const int pairs = T * K;
  const size_t n = allreduceCount();
  const float one = 1.0f, zero = 0.0f;

  // Attention (simplified, as on the host): normed columns [attn_offset, +attn_shard) through the
  // row shard of the output projection; partial sums over ranks.
  if (!check(gpu::rmsNorm(x_, normed_, T, h, s), "rmsnorm kernel", error)) return false;
  if (!checkBlas(api_->gemmEx(handle_, kOpN, kOpN, h, T, attn_shard_, &one, w_o_, kDataBf16, h, normed_ + attn_offset_,
                              kDataBf16, h, &zero, partial_, kDataBf16, h, kComputeF32, kGemmDefault),
                 "cublasGemmEx (attention output)", error)) {
    return false;
  }
  const gpu::bf16* delta = partial_;
  if (allreduce) {
    if (!(*allreduce)(partial_, reduced_, n, s)) {
      *error = "allreduce after the attention output projection failed";
      return false;
    }
    delta = reduced_;
  }
  if (!check(gpu::residualAdd(x_, delta, n, s), "residual kernel", error)) return false;

  // Router (replicated): fp32 logits, top-k with softmax weights, pointer arrays for the experts.
  if (!check(gpu::rmsNorm(x_, normed_, T, h, s), "rmsnorm kernel", error)) return false;
  if (!checkBlas(api_->gemmEx(handle_, kOpN, kOpN, E, T, h, &one, w_router_, kDataBf16, E, normed_, kDataBf16, h, &zero,
                              logits_, kDataF32, E, kComputeF32, kGemmDefault),
                 "cublasGemmEx (router)", error)) {
    return false;
  }
  if (!check(gpu::route(logits_, T, E, K, route_, s), "routing kernel", error)) return false;

  // Experts (SwiGLU) on this rank's intermediate shard: one GEMV per (token, k) pair, batched.
  if (!checkBlas(api_->gemmBatchedEx(handle_, kOpN, kOpN, I, 1, h, &one, route_.gu_a, kDataBf16, I, route_.gu_b,
                                     kDataBf16, h, &zero, route_.gu_c, kDataBf16, I, 2 * pairs, kComputeF32,
                                     kGemmDefault),
                 "cublasGemmBatchedEx (expert gate/up)", error)) {
    return false;
  }
  if (!check(gpu::swiglu(route_.gate_up, route_.act, static_cast<size_t>(pairs) * I, s), "swiglu kernel", error)) {
    return false;
  }
  if (!checkBlas(api_->gemmBatchedEx(handle_, kOpN, kOpN, h, 1, I, &one, route_.dn_a, kDataBf16, h, route_.dn_b,
                                     kDataBf16, I, &zero, route_.dn_c, kDataBf16, h, pairs, kComputeF32, kGemmDefault),
                 "cublasGemmBatchedEx (expert down)", error)) {
    return false;
  }
  if (!check(gpu::combine(route_.expert_out, route_.weight, partial_, T, K, h, s), "combine kernel", error)) return false;
  delta = partial_;
  if (allreduce) {
    if (!(*allreduce)(partial_, reduced_, n, s)) {
      *error = "allreduce after the experts failed";
      return false;
    }
    delta = reduced_;
  }
  return check(gpu::residualAdd(x_, delta, n, s), "residual kernel", error);
}

}  // namespace moe

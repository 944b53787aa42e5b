#include <cfloat>
#include <climits>
#include <cstdint>

#include "moe_kernels.h"

namespace moe {
namespace gpu {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFull = 0xffffffffu;

unsigned blocksFor(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535u * 32u ? (b > 0 ? b : 1) : 65535u * 32u);
}

__device__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void initUniformKernel(bf16* w, size_t n, float scale, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t r = mix64(seed * 0x9e3779b97f4a7c15ull + i);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    w[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// One block per token; the sum of squares is reduced in a fixed order (per thread, then warp
// butterfly, then warp 0 over the warp sums), so every replay and every rank gets the same bits.
__global__ void rmsNormKernel(const float* x, bf16* out, int hidden) {
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float inv_rms;
  const float* row = x + static_cast<size_t>(blockIdx.x) * hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += row[i] * row[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(kFull, ss, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += warp_sums[w];
    inv_rms = rsqrtf(total / static_cast<float>(hidden) + 1e-6f);
  }
  __syncthreads();
  bf16* dst = out + static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __float2bfloat16(row[i] * inv_rms);
}

__global__ void residualAddKernel(float* x, const bf16* delta, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] += __bfloat162float(delta[i]);
  }
}

// (value, index) order of the top-k: larger value first, ties to the lower index.
__device__ bool ranksBefore(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

// One warp per token. Round j finds the best expert ranked after round j-1's pick, so no list of
// chosen experts is kept; lane j keeps pick j and then writes its pair's routing and pointers.
__global__ void routeKernel(const float* logits, int tokens, int experts, int top_k, RouteOutputs o) {
  const int lane = threadIdx.x & 31;
  const int t = static_cast<int>((static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  if (t >= tokens) return;
  const float* l = logits + static_cast<size_t>(t) * experts;
  float prev_v = FLT_MAX, my_v = -FLT_MAX;
  int prev_i = -1, my_i = 0;
  for (int j = 0; j < top_k; ++j) {
    float best_v = -INFINITY;
    int best_i = INT_MAX;
    for (int e = lane; e < experts; e += 32) {
      const float v = l[e];
      const bool after_prev = j == 0 || ranksBefore(prev_v, prev_i, v, e);
      if (after_prev && (best_i == INT_MAX || ranksBefore(v, e, best_v, best_i))) {
        best_v = v;
        best_i = e;
      }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(kFull, best_v, off);
      const int oi = __shfl_xor_sync(kFull, best_i, off);
      if (oi != INT_MAX && (best_i == INT_MAX || ranksBefore(ov, oi, best_v, best_i))) {
        best_v = ov;
        best_i = oi;
      }
    }
    prev_v = best_v;
    prev_i = best_i;
    if (lane == j) {
      my_v = best_v;
      my_i = best_i;
    }
  }
  // Softmax over the k picks; pick 0 is the maximum. The sum is reduced to lane 0 and broadcast so
  // every lane divides by the same value.
  const float top = __shfl_sync(kFull, my_v, 0);
  const float ex = lane < top_k ? expf(my_v - top) : 0.0f;
  float sum = ex;
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(kFull, sum, off);
  sum = __shfl_sync(kFull, sum, 0);
  if (lane >= top_k) return;
  const int pairs = tokens * top_k;
  const int p = t * top_k + lane;
  const size_t h = static_cast<size_t>(o.hidden), inter = static_cast<size_t>(o.inter);
  o.expert[p] = my_i;
  o.weight[p] = ex / sum;
  const bf16* in = o.normed + static_cast<size_t>(t) * h;
  const size_t we = static_cast<size_t>(my_i) * h * inter;  // same size for gate, up and down
  o.gu_a[p] = o.w_gate + we;
  o.gu_a[pairs + p] = o.w_up + we;
  o.gu_b[p] = in;
  o.gu_b[pairs + p] = in;
  o.gu_c[p] = o.gate_up + static_cast<size_t>(p) * inter;
  o.gu_c[pairs + p] = o.gate_up + (static_cast<size_t>(pairs) + p) * inter;
  o.dn_a[p] = o.w_down + we;
  o.dn_b[p] = o.act + static_cast<size_t>(p) * inter;
  o.dn_c[p] = o.expert_out + static_cast<size_t>(p) * h;
}

__global__ void swigluKernel(const bf16* gate_up, bf16* act, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = __bfloat162float(gate_up[i]);
    const float u = __bfloat162float(gate_up[n + i]);
    act[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void combineKernel(const bf16* expert_out, const float* weight, bf16* out, int tokens, int top_k,
                              int hidden) {
  const size_t n = static_cast<size_t>(tokens) * hidden;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const size_t t = i / hidden, c = i % hidden;
    float acc = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const size_t p = t * top_k + j;
      acc += weight[p] * __bfloat162float(expert_out[p * hidden + c]);
    }
    out[i] = __float2bfloat16(acc);
  }
}

}  // namespace

cudaError_t initUniform(bf16* w, size_t n, float scale, uint64_t seed, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  initUniformKernel<<<blocksFor(n), kThreads, 0, s>>>(w, n, scale, seed);
  return cudaGetLastError();
}

cudaError_t rmsNorm(const float* x, bf16* out, int tokens, int hidden, cudaStream_t s) {
  rmsNormKernel<<<static_cast<unsigned>(tokens), kThreads, 0, s>>>(x, out, hidden);
  return cudaGetLastError();
}

cudaError_t residualAdd(float* x, const bf16* delta, size_t n, cudaStream_t s) {
  residualAddKernel<<<blocksFor(n), kThreads, 0, s>>>(x, delta, n);
  return cudaGetLastError();
}

cudaError_t route(const float* logits, int tokens, int experts, int top_k, const RouteOutputs& o, cudaStream_t s) {
  if (top_k < 1 || top_k > kMaxTopK || top_k > experts) return cudaErrorInvalidValue;
  const size_t threads = static_cast<size_t>(tokens) * 32;
  routeKernel<<<blocksFor(threads), kThreads, 0, s>>>(logits, tokens, experts, top_k, o);
  return cudaGetLastError();
}

cudaError_t swiglu(const bf16* gate_up, bf16* act, size_t n, cudaStream_t s) {
  swigluKernel<<<blocksFor(n), kThreads, 0, s>>>(gate_up, act, n);
  return cudaGetLastError();
}

cudaError_t combine(const bf16* expert_out, const float* weight, bf16* out, int tokens, int top_k, int hidden,
                    cudaStream_t s) {
  combineKernel<<<blocksFor(static_cast<size_t>(tokens) * hidden), kThreads, 0, s>>>(expert_out, weight, out, tokens,
                                                                                     top_k, hidden);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace moe

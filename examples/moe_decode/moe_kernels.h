// Small kernels of the GPU MoE decoder (moe_kernels.cu): everything between the cuBLAS GEMMs.
// Every launcher is stream-ordered and graph-capturable; results are deterministic (fixed
// reduction orders, no atomics), so two replays of a step give bitwise-identical states.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace moe {
namespace gpu {

using bf16 = __nv_bfloat16;

/// Largest top-k the routing kernel handles (one lane of a warp per chosen expert).
constexpr int kMaxTopK = 32;

/// What the routing kernel writes for the routed experts: per (token, k) pair p = t * top_k + j,
/// the expert index and softmax weight, and the pointer arrays of the two batched GEMMs
/// (gate/up: 2 * pairs entries, gate ones first; down: pairs entries).
struct RouteOutputs {
  const bf16* w_gate;  // experts x [hidden x inter] row-major
  const bf16* w_up;
  const bf16* w_down;  // experts x [inter x hidden] row-major
  const bf16* normed;  // [tokens x hidden]
  bf16* gate_up;       // [2 x pairs x inter]: gate outputs, then up outputs
  bf16* act;           // [pairs x inter]
  bf16* expert_out;    // [pairs x hidden]
  int* expert;         // [pairs]
  float* weight;       // [pairs]
  const void** gu_a;   // [2 * pairs]
  const void** gu_b;
  void** gu_c;
  const void** dn_a;  // [pairs]
  const void** dn_b;
  void** dn_c;
  int hidden, inter;
};

/// Fills w[0, n) with uniform values in [-scale, scale) from a counter hash of (seed, index).
cudaError_t initUniform(bf16* w, size_t n, float scale, uint64_t seed, cudaStream_t s);
/// out[t] = x[t] / rms(x[t]) in bf16, one row of `hidden` per token.
cudaError_t rmsNorm(const float* x, bf16* out, int tokens, int hidden, cudaStream_t s);
/// x[i] += delta[i].
cudaError_t residualAdd(float* x, const bf16* delta, size_t n, cudaStream_t s);
/// Top-k of each token's router logits [tokens x experts] (ties to the lower index), softmax
/// weights over the chosen k, and the batched-GEMM pointer arrays. top_k <= kMaxTopK.
cudaError_t route(const float* logits, int tokens, int experts, int top_k, const RouteOutputs& o, cudaStream_t s);
/// act[i] = silu(gate[i]) * up[i] over n = pairs * inter elements (gate_up as in RouteOutputs).
cudaError_t swiglu(const bf16* gate_up, bf16* act, size_t n, cudaStream_t s);
/// out[t] = sum_j weight[t*k+j] * expert_out[t*k+j] (fp32 accumulation, fixed order), bf16.
cudaError_t combine(const bf16* expert_out, const float* weight, bf16* out, int tokens, int top_k, int hidden,
                    cudaStream_t s);

}  // namespace gpu
}  // namespace moe

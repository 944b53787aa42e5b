// A tensor-parallel Mixture-of-Experts decoder layer on the CPU (fp32, CBLAS), with the two
// allreduces per layer an engine performs: after the attention output projection (row-sharded)
// and after the expert FFNs (each expert's intermediate dimension sharded over the ranks).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace moe {

struct Preset {
  std::string name;
  int hidden;
  int experts;
  int top_k;
  int expert_inter;  // intermediate size of one expert (before sharding)
  int layers;
};

/// kimi-k2, deepseek-v3, qwen3-30b-a3b, tiny. False for an unknown name.
bool findPreset(const std::string& name, Preset* out);
const char* presetNames();

/// Allreduce (sum) of a [tokens x hidden] fp32 activation in place; returns false on error.
using AllReduceFn = std::function<bool(float* data, size_t count)>;
/// The fused form: residual += allreduce(partial) in place, and partial <- RMSNorm(residual) (gamma
/// 1, eps 1e-6); both [tokens x hidden] fp32. Returns false on error.
using FusedFn = std::function<bool(float* partial, float* residual, size_t tokens)>;

/// The weights one rank of a world-rank model holds, as generated: the replicated router and this
/// rank's shards (its rows of the attention output projection, its columns of every expert's gate
/// and up, its rows of every expert's down). They are the model's input: the sharded Model and the
/// unsharded reference (moe_reference.h) both start from them, each with its own computation.
struct ShardWeights {
  std::vector<float> o;       // [attn_shard x hidden]
  std::vector<float> router;  // [hidden x experts]
  std::vector<float> gate;    // experts x [hidden x inter_shard]
  std::vector<float> up;      // experts x [hidden x inter_shard]
  std::vector<float> down;    // experts x [inter_shard x hidden]
};
ShardWeights generateShard(const Preset& p, int rank, int world, unsigned seed);

class Model {
 public:
  /// Weights are random and identical on every rank for the replicated parts; each rank holds its
  /// shard of the sharded ones. One set of layer weights serves every layer (same shapes, same
  /// compute and communication as distinct weights, a fraction of the memory).
  Model(const Preset& p, int rank, int world, unsigned seed);
  /// Runs every layer on hidden [tokens x hidden] in place. With fused, each layer's attention and
  /// MoE outputs go through it (allreduce + residual add + the next RMSNorm in one call) instead of
  /// allreduce, then a separate add and norm.
  bool forward(std::vector<float>* hidden, int tokens, const AllReduceFn& allreduce,
               const FusedFn* fused = nullptr) const;
  size_t weightBytes() const;
  /// What a rank of a world-rank model of preset p holds (weights, plus activations for tokens),
  /// before allocating any of it; the largest shard of any rank.
  static size_t estimateBytes(const Preset& p, int world, int tokens);

 private:
  bool layer(std::vector<float>* x, int tokens, const AllReduceFn& allreduce) const;
  bool layerFused(std::vector<float>* x, std::vector<float>* normed, int tokens, const FusedFn& fused) const;
  /// Attention output projection of normed into partial (this rank's partial sums).
  void attention(const std::vector<float>& normed, int tokens, std::vector<float>* partial) const;
  /// Router and expert FFNs on normed into partial (this rank's partial sums).
  void experts(const std::vector<float>& normed, int tokens, std::vector<float>* partial) const;

  Preset p_;
  int world_;
  int attn_shard_;   // hidden / world columns of the attention output this rank projects
  int inter_shard_;  // expert_inter / world
  int attn_offset_;  // first attention column of this rank's shard
  std::vector<float> w_o_;      // [attn_shard x hidden]  row shard of the output projection
  std::vector<float> w_router_; // [hidden x experts]     replicated
  std::vector<float> w_gate_;   // experts x [hidden x inter_shard]
  std::vector<float> w_up_;     // experts x [hidden x inter_shard]
  std::vector<float> w_down_;   // experts x [inter_shard x hidden]
};

}  // namespace moe

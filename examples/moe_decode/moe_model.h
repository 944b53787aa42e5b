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

class Model {
 public:
  /// Weights are random and identical on every rank for the replicated parts; each rank holds its
  /// shard of the sharded ones. One set of layer weights serves every layer (same shapes, same
  /// compute and communication as distinct weights, a fraction of the memory).
  Model(const Preset& p, int rank, int world, unsigned seed);
  /// Runs every layer on hidden [tokens x hidden] in place.
  bool forward(std::vector<float>* hidden, int tokens, const AllReduceFn& allreduce) const;
  size_t weightBytes() const;

 private:
  bool layer(std::vector<float>* x, int tokens, const AllReduceFn& allreduce) const;

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

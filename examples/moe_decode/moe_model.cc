#include "moe_model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

namespace moe {
namespace {

const Preset kPresets[] = {
    {"kimi-k2", 7168, 384, 8, 2048, 61},
    {"deepseek-v3", 7168, 256, 8, 2048, 61},
    {"qwen3-30b-a3b", 2048, 128, 8, 768, 48},
    {"tiny", 256, 16, 4, 128, 4},
};

void fillRandom(std::vector<float>* w, size_t n, float scale, std::mt19937* rng) {
  std::uniform_real_distribution<float> d(-scale, scale);
  w->resize(n);
  for (float& x : *w) x = d(*rng);
}

void rmsNorm(float* x, int n) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + 1e-6));
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// C[m x n] = A[m x k] * B[k x n], row-major.
void gemm(const float* a, const float* b, float* c, int m, int n, int k, int lda, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, n, beta, c, n);
}

}  // namespace

bool findPreset(const std::string& name, Preset* out) {
  for (const Preset& p : kPresets) {
    if (p.name == name) {
      *out = p;
      return true;
    }
  }
  return false;
}

const char* presetNames() { return "kimi-k2, deepseek-v3, qwen3-30b-a3b, tiny"; }

namespace {
int attnShard(const Preset& p, int rank, int world) {
  return p.hidden / world + (rank == world - 1 ? p.hidden % world : 0);
}
int interShard(const Preset& p, int world) { return std::max(1, p.expert_inter / world); }
}  // namespace

ShardWeights generateShard(const Preset& p, int rank, int world, unsigned seed) {
  const size_t h = p.hidden, e = p.experts, a = attnShard(p, rank, world), i = interShard(p, world);
  ShardWeights w;
  std::mt19937 shared(seed);  // replicated weights: the same stream on every rank
  fillRandom(&w.router, h * e, 1.0f / std::sqrt(static_cast<float>(h)), &shared);
  std::mt19937 local(seed + 1000u * (rank + 1));  // shards: each rank its own
  fillRandom(&w.o, a * h, 1.0f / std::sqrt(static_cast<float>(h)), &local);
  fillRandom(&w.gate, e * h * i, 1.0f / std::sqrt(static_cast<float>(h)), &local);
  fillRandom(&w.up, e * h * i, 1.0f / std::sqrt(static_cast<float>(h)), &local);
  fillRandom(&w.down, e * i * h, 1.0f / std::sqrt(static_cast<float>(p.expert_inter)), &local);
  return w;
}

Model::Model(const Preset& p, int rank, int world, unsigned seed)
    : p_(p),
      world_(world),
      attn_shard_(attnShard(p, rank, world)),
      inter_shard_(interShard(p, world)),
      attn_offset_(rank * (p.hidden / world)) {
  ShardWeights w = generateShard(p, rank, world, seed);
  w_o_ = std::move(w.o);
  w_router_ = std::move(w.router);
  w_gate_ = std::move(w.gate);
  w_up_ = std::move(w.up);
  w_down_ = std::move(w.down);
}

size_t Model::weightBytes() const {
  return sizeof(float) * (w_o_.size() + w_router_.size() + w_gate_.size() + w_up_.size() + w_down_.size());
}

size_t Model::estimateBytes(const Preset& p, int world, int tokens) {
  const size_t h = p.hidden, e = p.experts, t = tokens;
  const size_t a = p.hidden / world + p.hidden % world, i = std::max(1, p.expert_inter / world);
  const size_t weights = a * h + h * e + 3 * e * h * i;
  // hidden, its copy per step, normed, partial, the expert inputs/outputs (top-k rows per token) and
  // the logits; the fused call's sum buffer
  const size_t activations = 6 * t * h + 2 * t * p.top_k * (h + 2 * i) + t * e;
  return sizeof(float) * (weights + activations);
}

void Model::attention(const std::vector<float>& normed, int tokens, std::vector<float>* partial) const {
  // Attention (simplified): the normalised hidden state stands in for the attention context; this
  // rank owns columns [attn_offset, attn_offset + attn_shard) and projects them with its row shard.
  const int h = p_.hidden;
  partial->resize(static_cast<size_t>(tokens) * h);
  gemm(normed.data() + attn_offset_, w_o_.data(), partial->data(), tokens, h, attn_shard_, h);
}

void Model::experts(const std::vector<float>& normed, int tokens, std::vector<float>* partialp) const {
  std::vector<float>& partial = *partialp;
  const int h = p_.hidden, E = p_.experts, I = inter_shard_;
  // Router (replicated, so every rank picks the same experts), top-k with softmax weights.
  std::vector<float> logits(static_cast<size_t>(tokens) * E);
  gemm(normed.data(), w_router_.data(), logits.data(), tokens, E, h, h);
  std::vector<std::vector<std::pair<int, float>>> routed(E);  // expert -> (token, weight)
  std::vector<int> order(E);
  for (int t = 0; t < tokens; ++t) {
    const float* l = &logits[static_cast<size_t>(t) * E];
    for (int e = 0; e < E; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + p_.top_k, order.end(),
                      [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    float mx = l[order[0]], sum = 0;
    for (int j = 0; j < p_.top_k; ++j) sum += std::exp(l[order[j]] - mx);
    for (int j = 0; j < p_.top_k; ++j) routed[order[j]].push_back({t, std::exp(l[order[j]] - mx) / sum});
  }

  // Expert FFNs (SwiGLU) on this rank's intermediate shard; partial outputs summed by allreduce.
  partial.assign(static_cast<size_t>(tokens) * h, 0.0f);
  std::vector<float> in, gate, up, out;
  for (int e = 0; e < E; ++e) {
    const int n = static_cast<int>(routed[e].size());
    if (n == 0) continue;
    in.resize(static_cast<size_t>(n) * h);
    for (int j = 0; j < n; ++j) {
      std::copy_n(&normed[static_cast<size_t>(routed[e][j].first) * h], h, &in[static_cast<size_t>(j) * h]);
    }
    gate.resize(static_cast<size_t>(n) * I);
    up.resize(gate.size());
    out.resize(static_cast<size_t>(n) * h);
    const size_t wi = static_cast<size_t>(e) * h * I;
    gemm(in.data(), &w_gate_[wi], gate.data(), n, I, h, h);
    gemm(in.data(), &w_up_[wi], up.data(), n, I, h, h);
    for (size_t k = 0; k < gate.size(); ++k) gate[k] = gate[k] / (1.0f + std::exp(-gate[k])) * up[k];
    gemm(gate.data(), &w_down_[static_cast<size_t>(e) * I * h], out.data(), n, h, I, I);
    for (int j = 0; j < n; ++j) {
      float* dst = &partial[static_cast<size_t>(routed[e][j].first) * h];
      const float w = routed[e][j].second;
      const float* src = &out[static_cast<size_t>(j) * h];
      for (int k = 0; k < h; ++k) dst[k] += w * src[k];
    }
  }
}

bool Model::layer(std::vector<float>* xp, int tokens, const AllReduceFn& allreduce) const {
  std::vector<float>& x = *xp;
  const int h = p_.hidden;
  std::vector<float> normed(x), partial;
  for (int t = 0; t < tokens; ++t) rmsNorm(&normed[static_cast<size_t>(t) * h], h);
  attention(normed, tokens, &partial);
  if (!allreduce(partial.data(), partial.size())) return false;
  for (size_t k = 0; k < x.size(); ++k) x[k] += partial[k];
  normed = x;
  for (int t = 0; t < tokens; ++t) rmsNorm(&normed[static_cast<size_t>(t) * h], h);
  experts(normed, tokens, &partial);
  if (!allreduce(partial.data(), partial.size())) return false;
  for (size_t k = 0; k < x.size(); ++k) x[k] += partial[k];
  return true;
}

// normed holds RMSNorm(x) on entry (from the previous layer's fused call) and on return.
bool Model::layerFused(std::vector<float>* x, std::vector<float>* normed, int tokens, const FusedFn& fused) const {
  std::vector<float> partial;
  attention(*normed, tokens, &partial);
  if (!fused(partial.data(), x->data(), tokens)) return false;
  normed->swap(partial);  // the fused call wrote the norm over its input
  experts(*normed, tokens, &partial);
  if (!fused(partial.data(), x->data(), tokens)) return false;
  normed->swap(partial);
  return true;
}

bool Model::forward(std::vector<float>* hidden, int tokens, const AllReduceFn& allreduce, const FusedFn* fused) const {
  if (fused) {
    std::vector<float> normed(*hidden);  // the first layer's input norm; later ones come fused
    for (int t = 0; t < tokens; ++t) rmsNorm(&normed[static_cast<size_t>(t) * p_.hidden], p_.hidden);
    for (int l = 0; l < p_.layers; ++l) {
      if (!layerFused(hidden, &normed, tokens, *fused)) return false;
    }
    return true;
  }
  for (int l = 0; l < p_.layers; ++l) {
    if (!layer(hidden, tokens, allreduce)) return false;
  }
  return true;
}

}  // namespace moe

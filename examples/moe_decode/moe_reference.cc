#include "moe_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>

namespace moe {
namespace {

constexpr double kFp32UnitRoundoff = 1.0 / (1 << 24);
// --reference auto: what one process may hold for it and what it may compute (plain fp64 loops run
// at a few GMAC/s, so this is seconds).
constexpr size_t kAutoMaxBytes = size_t{1} << 30;
constexpr double kAutoMaxMacs = 1e10;
constexpr int kPrintedPerRank = 3;

int denseInter(const Preset& p, int world) { return world * std::max(1, p.expert_inter / world); }

// The unsharded model: the ranks' shards side by side, in rank order. The layout is read off the
// shard sizes alone, not taken from the sharded model's offsets, so a mistake there cannot hide in
// both computations at once.
struct Dense {
  size_t h = 0, experts = 0, top_k = 0, inter = 0;  // inter: the unsharded intermediate size
  std::vector<float> o;                             // [h x h]: rank 0's rows, then rank 1's, ...
  std::vector<float> router;                        // [h x experts]
  std::vector<std::vector<float>> gate_t, up_t;     // per expert [inter x h]: one row per unit
  std::vector<std::vector<float>> down;             // per expert [inter x h]
};

Dense assemble(const Preset& p, int world, unsigned seed, std::string* error) {
  Dense d;
  d.h = p.hidden;
  d.experts = p.experts;
  d.top_k = p.top_k;
  const size_t h = d.h, E = d.experts;
  d.gate_t.resize(E);
  d.up_t.resize(E);
  d.down.resize(E);
  for (int r = 0; r < world; ++r) {  // one shard at a time, so the peak is the dense model plus one
    const ShardWeights w = generateShard(p, r, world, seed);
    if (r == 0) d.router = w.router;  // replicated: the same stream on every rank
    d.o.insert(d.o.end(), w.o.begin(), w.o.end());
    const size_t units = w.gate.size() / (E * h);  // this rank's intermediate units per expert
    for (size_t e = 0; e < E; ++e) {
      const float* g = &w.gate[e * h * units];
      const float* u = &w.up[e * h * units];
      for (size_t c = 0; c < units; ++c) {
        for (size_t k = 0; k < h; ++k) {
          d.gate_t[e].push_back(g[k * units + c]);
          d.up_t[e].push_back(u[k * units + c]);
        }
      }
      d.down[e].insert(d.down[e].end(), w.down.begin() + e * units * h, w.down.begin() + (e + 1) * units * h);
    }
    d.inter += units;
  }
  if (d.o.size() != h * h || d.router.size() != h * E) {
    *error = "the ranks' shards of the attention output projection hold " + std::to_string(d.o.size() / h) +
             " rows, not hidden = " + std::to_string(h);
  }
  return d;
}

void rmsNormed(const std::vector<double>& x, std::vector<double>* n) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-6);
  for (size_t i = 0; i < x.size(); ++i) (*n)[i] = x[i] * inv;
}

double dot(const std::vector<double>& a, const float* b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// One token through every layer, in place. Tokens never mix (attention is not computed), so each is
// its own forward pass. Returns the first layer whose k-th and (k+1)-th router logits are closer
// than fp32 rounding could move them (the sharded run may then pick another expert), or -1.
int forwardToken(const Dense& d, int layers, double tolerance, std::vector<double>* xp) {
  std::vector<double>& x = *xp;
  const size_t h = d.h, E = d.experts, K = d.top_k;
  std::vector<double> n(h), acc(h), logits(E), magnitude(E);
  std::vector<size_t> order(E);
  int near_tie = -1;
  for (int l = 0; l < layers; ++l) {
    // Attention output projection; the normalised state stands in for the attention context.
    rmsNormed(x, &n);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t k = 0; k < h; ++k) {
      const float* row = &d.o[k * h];
      for (size_t j = 0; j < h; ++j) acc[j] += n[k] * row[j];
    }
    for (size_t j = 0; j < h; ++j) x[j] += acc[j];

    // Router: top-k (ties to the lower expert index), softmax over the k.
    rmsNormed(x, &n);
    for (size_t e = 0; e < E; ++e) {
      double s = 0, m = 0;
      for (size_t k = 0; k < h; ++k) {
        const double term = n[k] * d.router[k * E + e];
        s += term;
        m += std::fabs(term);
      }
      logits[e] = s;
      magnitude[e] = m;
    }
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    // The fp32 logit of expert e is off by about tolerance x magnitude[e]; twice that covers both sides.
    const double margin = 2 * tolerance * *std::max_element(magnitude.begin(), magnitude.end());
    if (K < E && near_tie < 0 && logits[order[K - 1]] - logits[order[K]] <= margin) near_tie = l;
    double sum = 0;
    for (size_t j = 0; j < K; ++j) sum += std::exp(logits[order[j]] - logits[order[0]]);

    // Routed experts, SwiGLU over the full intermediate dimension, mixed by the router weights.
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t j = 0; j < K; ++j) {
      const size_t e = order[j];
      const double weight = std::exp(logits[e] - logits[order[0]]) / sum;
      for (size_t i = 0; i < d.inter; ++i) {
        const double g = dot(n, &d.gate_t[e][i * h]), u = dot(n, &d.up_t[e][i * h]);
        const double a = weight * g / (1.0 + std::exp(-g)) * u;
        const float* row = &d.down[e][i * h];
        for (size_t c = 0; c < h; ++c) acc[c] += a * row[c];
      }
    }
    for (size_t j = 0; j < h; ++j) x[j] += acc[j];
  }
  return near_tie;
}

}  // namespace

double referenceTolerance(const Preset& p, int world) {
  // The longest chain of fp32 additions behind one output element, per layer: two RMSNorm sums (h
  // each), the output projection (h, split over the ranks, then world - 1 in the allreduce), the
  // gate/up dot products (h), the down projection (the intermediate size, then world - 1), the mix
  // of the top-k experts (k), two residual adds. A sum of n terms is within about n x 2^-24 of
  // exact, relative to the terms' magnitude; a wrong or missing partial sum is off by O(1).
  const double per_layer = 4.0 * p.hidden + denseInter(p, world) + p.top_k + 2.0 * world + 2;
  return p.layers * per_layer * kFp32UnitRoundoff;
}

size_t referenceBytes(const Preset& p, int world) {
  const size_t h = p.hidden, E = p.experts, I = denseInter(p, world);
  const size_t dense = sizeof(float) * (h * h + h * E + 3 * E * h * I);
  return dense + dense / world + sizeof(float) * h * E;
}

bool referenceAffordable(const Preset& p, int world, int tokens, std::string* why) {
  const double h = p.hidden, I = denseInter(p, world);
  const double macs = static_cast<double>(tokens) * p.layers * (h * h + h * p.experts + 3.0 * p.top_k * h * I);
  const size_t bytes = referenceBytes(p, world);
  if (bytes <= kAutoMaxBytes && macs <= kAutoMaxMacs) return true;
  char buf[256];
  snprintf(buf, sizeof(buf), "it would hold %.1f GiB and take %.1e fp64 multiply-adds (auto: up to 1 GiB and 1e10)",
           bytes / (1024.0 * 1024 * 1024), macs);
  *why = buf;
  return false;
}

const Reference& unshardedReference(const Args& args, int world, unsigned seed) {
  static std::mutex mutex;
  static std::unique_ptr<Reference> cached;  // every rank of this process asks for the same one
  std::lock_guard<std::mutex> lock(mutex);
  if (cached) return *cached;
  auto ref = std::make_unique<Reference>();
  const Preset& p = args.preset;
  ref->tolerance = referenceTolerance(p, world);
  const Dense d = assemble(p, world, seed, &ref->error);
  const std::vector<float> in = initialHidden(args);  // the input tokens, as every rank has them
  const size_t h = p.hidden;
  const int tokens = args.tokens();
  ref->out.resize(in.size());
  ref->near_tie.assign(tokens, -1);
  std::vector<double> x(h);
  for (int t = 0; t < tokens && ref->error.empty(); ++t) {
    std::copy_n(&in[t * h], h, x.begin());
    ref->near_tie[t] = forwardToken(d, p.layers, ref->tolerance, &x);
    std::copy(x.begin(), x.end(), &ref->out[t * h]);
  }
  cached = std::move(ref);
  return *cached;
}

void checkAgainstReference(const Reference& ref, const std::vector<float>& got, int hidden, int rank,
                           const std::string& run, int step, int total_steps, ReferenceCheck* acc) {
  const size_t h = hidden;
  if (!ref.error.empty() || got.size() != ref.out.size()) {
    if (acc->printed++ < kPrintedPerRank) {
      fprintf(stderr, "moe_decode: rank %d, %s, step %d of %d: no comparison with the unsharded reference: %s\n", rank,
              run.c_str(), step + 1, total_steps,
              ref.error.empty() ? "the state has the wrong size" : ref.error.c_str());
    }
    acc->mismatches += static_cast<long>(std::max<size_t>(1, got.size()));
    return;
  }
  for (size_t t = 0; t < ref.near_tie.size(); ++t) {
    const double* r = &ref.out[t * h];
    const float* g = &got[t * h];
    double scale = 0;
    for (size_t j = 0; j < h; ++j) scale = std::max(scale, std::fabs(r[j]));
    if (scale == 0) scale = 1;
    if (ref.near_tie[t] >= 0) {  // compared all the same; a difference is counted apart, not failed
      long beyond = 0;
      double worst = 0;
      for (size_t j = 0; j < h; ++j) {
        const double rel = std::fabs(g[j] - r[j]) / scale;
        worst = std::isnan(rel) ? INFINITY : std::max(worst, rel);
        beyond += !(rel <= ref.tolerance);
      }
      if (beyond)
        acc->excused += beyond;
      else
        acc->max_rel = std::max(acc->max_rel, worst);
      continue;
    }
    for (size_t j = 0; j < h; ++j) {
      const double diff = std::fabs(g[j] - r[j]), rel = diff / scale;
      acc->max_rel = std::isnan(rel) ? INFINITY : std::max(acc->max_rel, rel);
      if (rel <= ref.tolerance) continue;  // (NaN is not)
      ++acc->mismatches;
      if (acc->printed++ < kPrintedPerRank) {
        fprintf(stderr,
                "moe_decode: rank %d, %s, step %d of %d: element %zu (token %zu, column %zu) is %.9g, the unsharded "
                "fp64 reference has %.9g: |diff| %.3g is %.3g of the token's largest |reference| %.4g, above the "
                "tolerance %.3g\n",
                rank, run.c_str(), step + 1, total_steps, t * h + j, t, j, static_cast<double>(g[j]), r[j], diff, rel,
                scale, ref.tolerance);
      }
    }
  }
}

}  // namespace moe

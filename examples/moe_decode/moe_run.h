// What the host and GPU variants of moe_decode share: the parsed command line, the per-algorithm
// results, the agreement checks and the report (stdout table and JSON).
#pragma once
#include <string>
#include <vector>

#include "moe_model.h"
#include "perf_group.h"
#include "symmar/symmar.h"

namespace moe {

struct Args {
  Preset preset;
  int batch = 4;
  int spec_tokens = 0;
  int steps = 5;
  int warmup = 1;
  std::vector<symmarAlgo_t> algos;  // empty: every algorithm available here
  std::string json;
  double tolerance = -1;  // < 0: the backend's default (1e-3 host fp32, 2e-2 GPU bf16)
  int tokens() const { return batch * (spec_tokens + 1); }
};

struct AlgoResult {
  symmarAlgo_t algo;
  double tokens_per_s, step_ms, allreduce_share, max_rel_diff;
};

struct RunSummary {
  const char* backend;        // "host" or "cuda"
  size_t weight_bytes;        // per rank
  size_t allreduce_elem_bytes;
  double tolerance;
  std::vector<AlgoResult> results;
  long disagree;              // ranks whose final states differ from rank 0's (summed over algorithms)
};

/// The same input tokens on every rank (fixed seed), [tokens x hidden].
std::vector<float> initialHidden(const Args& args);
/// Max |a-b| over max |b|: how far a run's final hidden states are from the reference run's.
double relDiff(const std::vector<float>& a, const std::vector<float>& b);
/// Ranks whose final states differ from rank 0's (checksum gather; collective).
long ranksDisagreeing(perf::Group& group, const std::vector<float>& hidden);
/// Prints the table (rank 0) and writes the JSON; returns the exit status (non-zero on disagreement).
int report(const Args& args, perf::Group& group, symmarComm_t comm, const RunSummary& s);

/// Whether this process sees a usable CUDA device (false with *why; always false without CUDA).
bool gpuPresent(std::string* why);
/// The GPU variant on device (moe_gpu_run.cc; only in builds with CUDA). Collective.
int runGpu(const Args& args, perf::Group& group, symmarComm_t comm, int device);

}  // namespace moe

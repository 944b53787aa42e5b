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
  bool fused = true;      // --fused on: also run each algorithm through the fused allreduce + norm
  int ranks_per_process = 1;  // --local-world N: N ranks share this process's address space
  std::string reference = "auto";  // --reference on|off|auto: check against the unsharded fp64 model
  bool plant_wrong = false;   // --test-plant-wrong: the same wrong element on every rank, every step
  int tokens() const { return batch * (spec_tokens + 1); }
};

struct AlgoResult {
  symmarAlgo_t algo;
  double tokens_per_s, step_ms, allreduce_share, max_rel_diff;
  bool fused = false;                // the step through symmarAllReduceAddRmsNorm
  double unfused_tokens_per_s = 0;   // fused rows: the same algorithm's unfused step, same run
};

struct RunSummary {
  const char* backend;        // "host" or "cuda"
  size_t weight_bytes;        // per rank
  size_t allreduce_elem_bytes;
  double tolerance;
  std::vector<AlgoResult> results;
  long disagree;              // ranks whose final states differ from rank 0's (summed over algorithms)
  std::string fused_note;     // why the fused call was not measured (empty: it was, or --fused off)
  // The unsharded fp64 reference (host variant): whether every rank's state after every step of every
  // run was compared, and what the comparisons found (summed or maxed over ranks).
  bool reference_checked = false;
  std::string reference_skipped = "";  // why not, when not (defaulted: the GPU variant sets none)
  double reference_tolerance = 0;
  double reference_max_rel_diff = 0;
  long reference_mismatches = 0;
  int reference_near_tie_tokens = 0;  // router near-ties: fp32 rounding may pick other experts there
  long reference_excused = 0;         // elements beyond the tolerance in those tokens (not a failure)
};

/// The same input tokens on every rank (fixed seed), [tokens x hidden].
std::vector<float> initialHidden(const Args& args);
/// Max |a-b| over max |b|: how far a run's final hidden states are from the reference run's.
double relDiff(const std::vector<float>& a, const std::vector<float>& b);
/// Ranks whose final states differ from rank 0's (checksum gather; collective).
long ranksDisagreeing(perf::Group& group, const std::vector<float>& hidden);
/// Prints the table (rank 0) and writes the JSON; returns the exit status (non-zero on disagreement).
int report(const Args& args, perf::Group& group, symmarComm_t comm, const RunSummary& s);

/// Empty when per_rank bytes for each of world ranks fit this machine's MemAvailable (and
/// ranks_in_process of them this process's address-space limit); else the refusal, naming
/// --experts and --layers. Reads no more than /proc.
std::string hostMemoryRefusal(const Args& args, int world, int ranks_in_process, size_t per_rank);
/// The refusal text for need = per_rank x ranks against available bytes at where; empty if it fits.
std::string tooBig(const Args& args, size_t per_rank, int ranks, size_t available, const char* where);

/// Whether this process sees a usable CUDA device (false with *why; always false without CUDA).
bool gpuPresent(std::string* why);
/// The GPU variant on device (moe_gpu_run.cc; only in builds with CUDA). Collective.
int runGpu(const Args& args, perf::Group& group, symmarComm_t comm, int device);

}  // namespace moe

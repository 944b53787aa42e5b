// The unsharded reference for moe_decode's host variant: the same model (the same generated
// weights, the same input tokens) computed on one rank, densely, in fp64, with no sharding and no
// allreduce. Every rank's final hidden states, after every decode step of every algorithm, must
// match it within a tolerance derived from the number of fp32 additions in the sharded path.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "moe_model.h"
#include "moe_run.h"

namespace moe {

struct Reference {
  std::vector<double> out;    // [tokens x hidden]: the final hidden states of one decode step
  std::vector<int> near_tie;  // per token: the first layer whose top-k boundary lies within the
                              // margin fp32 rounding can cross, or -1 (see ReferenceCheck::excused)
  double tolerance = 0;       // per element, relative to the largest |out| of its token
  std::string error;          // why there is no reference (the shards do not make a dense model)
};

/// (additions on the longest fp32 dependency chain of one output element) x 2^-24, for world ranks.
double referenceTolerance(const Preset& p, int world);
/// What computing the reference holds at its peak: the dense weights (fp32, as generated) plus one
/// rank's shard while it is being copied in.
size_t referenceBytes(const Preset& p, int world);
/// Whether --reference auto computes it (small enough to hold and to compute in seconds); else *why.
bool referenceAffordable(const Preset& p, int world, int tokens, std::string* why);
/// The reference for this run (seed: the one the ranks' Model was built with). Computed once per
/// process and shared by the ranks that live in it; safe to call from every rank's thread.
const Reference& unshardedReference(const Args& args, int world, unsigned seed);

/// What one rank's comparisons found, over all its runs and steps.
struct ReferenceCheck {
  long mismatches = 0;  // elements beyond the tolerance
  long excused = 0;     // the same, in tokens with a router near-tie: the sharded run may have picked
                        // another expert there, which no tolerance covers
  double max_rel = 0;   // largest |got - reference| / (the token's largest |reference|)
  int printed = 0;      // mismatch lines printed so far (a few per rank, then only counted)
};

/// Compares got, one rank's final hidden states after one step, with the reference; prints the first
/// few mismatches (rank, run, step, element, both values) to stderr.
void checkAgainstReference(const Reference& ref, const std::vector<float>& got, int hidden, int rank,
                           const std::string& run, int step, int total_steps, ReferenceCheck* acc);

}  // namespace moe

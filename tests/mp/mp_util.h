// Helpers for multi-rank tests: forked ranks with a shared result area, threaded ranks, and one
// allreduce case checked against a float64 reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "symmar/symmar.h"

namespace mp {

/// Runs body(rank) in nranks forked processes; returns each child's exit status (0 = passed,
/// -signal when killed). Children still running after timeout_s are killed.
std::vector<int> runForked(int nranks, const std::function<int(int rank)>& body, int timeout_s = 240);
/// Runs body(rank) in nranks threads of this process; returns each body's result.
std::vector<int> runThreads(int nranks, const std::function<int(int rank)>& body);

/// Memory shared by forked children (MAP_SHARED | MAP_ANONYMOUS), freed by the destructor.
class SharedWords {
 public:
  explicit SharedWords(size_t count);
  ~SharedWords();
  uint64_t& operator[](size_t i) { return words_[i]; }
  size_t size() const { return count_; }

 private:
  uint64_t* words_;
  size_t count_;
};

struct Case {
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  bool in_place;
  symmarAlgo_t algo;
  bool random_data;  // fractional values (tolerance) instead of small integers (exact)
};
std::string describe(const Case& c);

/// Fills inputs for rank (testref::smallIntInput or fractionalInput), runs the allreduce, checks
/// every element against the float64 reference of common/reference.h (exact for integer data and
/// max/min, within testref::sumTolerance for fractional sums), and returns the number of errors
/// (first few printed to stderr). *digest receives a hash of the output bytes for the cross-rank
/// comparison.
int runCase(symmarComm_t comm, int rank, int world, const Case& c, uint64_t* digest);

/// The case matrix of the host tests for a given staging size (counts include several times the staging buffer).
std::vector<Case> caseMatrix(size_t staging_bytes, bool full);

/// One reduce-scatter (scatter) or all-gather of count elements per rank.
struct GatherCase {
  bool scatter;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  bool in_place;  ///< the per-rank buffer at this rank's block of the whole one (NCCL's rule)
  symmarAlgo_t algo;
  /// Buffers from symmarMemAlloc (peers read inputs in place): 0 none, 1 every rank's, 2 even
  /// ranks' only (the others stage theirs).
  int symmetric = 0;
};
std::string describe(const GatherCase& c);
/// One call of c on comm (call numbers the inputs), checked element by element against the float64
/// reference: small integers, so every sum over up to 8 ranks is exact in every dtype. Returns the
/// number of failures (a failed call counts as one); they are printed to stderr.
int runGatherCase(symmarComm_t comm, int rank, int world, const GatherCase& c, int call);

/// Entries of /proc/self/fd.
int countOpenFds();
/// Lines of /proc/self/maps that mention the heap's memfd.
int countHeapMappings();

}  // namespace mp

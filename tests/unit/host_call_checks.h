// Host collectives that check themselves: each rank of a comm runs a sequence of calls on small
// integers (exact in bfloat16, and so are their sums over a few ranks) and checks every output
// element against the reduction in double. Shared by the tests of how the host backend stages
// (the staging ring, streaming staging writes), which must leave every result exact.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "symmar/symmar.h"

namespace hostcalls {

/// Rank `rank`'s element i in call `call`: a small integer in [-8, 8].
double inputAt(int rank, size_t i, int call);

/// rounds x 8 allreduces (one-shot and two-shot by turns, float32 and bfloat16, in place every
/// third call) of 2047 to 300000 elements, around and across the staging ring's limits and over
/// two chunks. Returns the wrong or failed calls.
int allReduceCalls(symmarComm_t comm, int rank, int world, int rounds);
/// The same over the given element counts.
int allReduceCalls(symmarComm_t comm, int rank, int world, int rounds, const std::vector<size_t>& counts);

/// rounds x 4 fused allreduce + residual + RMSNorm calls of 1024 float32 a row (2, 4, 8 and 19
/// rows), one-shot and two-shot by turns, every other call of each form with an fp8 output too.
/// Returns the wrong or failed calls.
int fusedCalls(symmarComm_t comm, int rank, int world, int rounds);
/// The same over the given row counts.
int fusedCalls(symmarComm_t comm, int rank, int world, int rounds, const std::vector<size_t>& row_counts);

/// rounds x 9 one-shot reduce-scatters and all-gathers by turns (in place every third call) of
/// blocks of 2047 to 131073 elements. Returns the wrong or failed calls.
int scatterGatherCalls(symmarComm_t comm, int rank, int world, int rounds);

/// Makes a host comm of `world` ranks in this process (symmarCommInitAll), runs body(comm, rank)
/// on a thread per rank, destroys the comm and returns what each rank's body returned; a comm
/// that cannot be made gives -1 for every rank.
std::vector<int> onThreadRanks(int world, const std::function<int(symmarComm_t, int)>& body);

/// Runs body(comm, rank) in `world` forked processes that form one host comm (5 s timeout), each
/// running before_init(rank) first where given (its environment, its CPU), and returns their exit
/// statuses (0: passed; 10: the comm could not be made; 100 + the wait status: killed).
std::vector<int> onForkedRanks(int world, const std::function<void(int)>& before_init,
                               const std::function<int(symmarComm_t, int)>& body);

}  // namespace hostcalls

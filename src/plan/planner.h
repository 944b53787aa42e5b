// The planner: from (row, availability, bytes) to an algorithm. Availability comes from each
// algorithm's traits (plan/algorithms.h) less SYMMAR_DISABLE; SYMMAR_ALGO forces one. The
// environment is read once per process.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "plan/algorithms.h"
#include "plan/table.h"
#include "symmar/symmar.h"

namespace symmar {

/// Algorithms that can serve (dtype, op) on this topology (each algorithm's can_implement, less
/// SYMMAR_DISABLE). fallbacks: bits of the fallbacks that are present (nccl for a GPU comm, mpi
/// for a host comm).
uint32_t availableAlgos(const symmarTopology_t& topo, symmarDataType_t dtype, symmarRedOp_t op, uint32_t fallbacks);
/// The same for a request of any collective (its size left out).
uint32_t availableAlgos(const symmarTopology_t& topo, const Request& request, uint32_t fallbacks);
/// availableAlgos remembered for one comm: per collective, dtype and op, computed again when the
/// fallbacks or the environment (reloadPlanEnv) changed, or after forget (the comm's topology
/// changed: symmarCommSetInterHost).
/// The collectives ask it on every planned call, where computing the mask each time is measurable
/// against a sub-microsecond host call. Entries are single words: threads that share a comm never
/// see half of one.
class AvailableAlgos {
 public:
  uint32_t of(const symmarTopology_t& topo, const Request& request, uint32_t fallbacks);
  /// Drops every entry: the next call of each computes it from the topology it passes.
  void forget();

 private:
  std::atomic<uint64_t> entries_[kNumCollectives][symmarNumTypes][symmarNumOps] = {};
};
/// Why algo cannot serve the request on this comm (Refusal::kNone: it can): its record
/// (canImplement, size included), then SYMMAR_DISABLE. The forced paths ask this.
Refusal refusalOf(symmarAlgo_t algo, const symmarTopology_t& topo, const Request& request, uint32_t fallbacks);

/// Picks the first entry of the row that serves dtypes of elem_bytes bytes an element
/// (entryServes), whose max_bytes covers bytes and that is available (an
/// unavailable multimem is served by the form that needs the same peer access: twoshot for an
/// allreduce, oneshot for a reduce-scatter or all-gather); above the last
/// threshold the fallback; without a fallback the largest available symmetric algorithm (chunked).
/// Returns symmarAlgoAuto when nothing can serve.
symmarAlgo_t chooseAlgo(const TableRow& row, uint32_t available, size_t bytes, size_t elem_bytes);

/// SYMMAR_ALGO and SYMMAR_DISABLE, parsed once per process (bad values reported once, ignored).
struct PlanEnv {
  symmarAlgo_t forced = symmarAlgoAuto;
  uint32_t disabled = 0;
};
const PlanEnv& planEnv();
/// Re-reads the variables (tests).
void reloadPlanEnv();
/// How many times the variables were read (AvailableAlgos recomputes after a reload).
uint32_t planEnvGeneration();

/// The tables symmarPlan uses: built-in plus SYMMAR_TABLE_FILE, loaded once. On a bad file returns
/// its error (again on every call) and leaves *tables null.
symmarResult_t processTables(const Tables** tables);
/// Drops the cached process tables so the next call reloads them (tests).
void resetProcessTables();

/// Full decision for one request: the algorithm SYMMAR_ALGO forces where it can serve the request
/// (where not, the table's choice, and the reason logged once), else the table.
symmarAlgo_t planRequest(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks, size_t count,
                         symmarDataType_t dtype, symmarRedOp_t op);
/// The same with the available algorithms given (a comm's AvailableAlgos).
symmarAlgo_t planRequest(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks, size_t count,
                         symmarDataType_t dtype, symmarRedOp_t op, uint32_t available);
/// The algorithm of a reduce-scatter or all-gather (request.coll) from that collective's row, which
/// is keyed by the whole buffer (nranks * request.bytes): the one SYMMAR_ALGO forces where it can
/// serve, else the row's choice (chooseAlgo). symmarAlgoAuto when nothing can serve.
symmarAlgo_t planScatterGather(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks,
                               const Request& request);
/// The same with the available algorithms given (a comm's AvailableAlgos).
symmarAlgo_t planScatterGather(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks,
                               const Request& request, uint32_t available);
/// The form of a fused allreduce + residual add + RMSNorm of tokens x hidden elements. Lamport
/// where the first entry of the fused call's own row (fused_row, sized by tokens x hidden
/// elements) that holds the call names it and the form can serve it (a GPU comm with peer access,
/// sched::lamportFusedFits). Else symmarAlgoAuto past the last threshold of a fused_row with
/// entries, however few the tokens; else the first available staged form of fused_row whose
/// threshold holds the call. A fused row without entries defers to the plain allreduce's row
/// (allreduce_row): one-shot where it says one-shot or lamport for the same bytes, two-shot
/// otherwise. With fewer tokens than ranks a two-shot so chosen (it would leave some ranks without
/// a row) gives way to the one-shot where allreduce_row says one-shot or lamport for the bytes, and
/// to symmarAlgoAuto (the unfused call) otherwise.
/// symmarAlgoAuto also when the comm has neither form (no shared memory), or for more tokens than
/// rows_cap (non-zero: the most rows the backend's fused kernels run a block each; past it rows
/// queue in a block and the unfused call is faster whatever the row says): the caller then runs
/// the allreduce and the norm separately.
symmarAlgo_t planAddRmsNorm(const TableRow& allreduce_row, const TableRow& fused_row, const symmarTopology_t& topo,
                            uint32_t fallbacks, size_t tokens, size_t hidden, symmarDataType_t dtype,
                            size_t rows_cap = 0);
/// The fused form that runs call, given the staging bytes a row takes in each form under the
/// executing backend's own layout (row_bytes[0]: one-shot, row_bytes[1]: two-shot) and a staging
/// half of half bytes: *algo (symmarAlgoOneShot or symmarAlgoTwoShot) unchanged when its rows fit;
/// a planned (call.planned, not forced) two-shot whose rows do not fit becomes the one-shot.
/// Otherwise symmarUnsupported, naming the bytes a row of the form needs against the half (and the
/// one-shot, where it fits).
symmarResult_t fitAddRmsNormForm(const AddRmsNormCall& call, const size_t row_bytes[2], size_t half,
                                 symmarAlgo_t* algo);

/// Logs once per (capability, link) which row serves a capability that has no row of its own.
void noteRowServed(int cc_major, int cc_minor, symmarLink_t link, const TableRow& row);

}  // namespace symmar

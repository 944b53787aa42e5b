// The planner: a pure function from (row, availability, bytes) to an algorithm, plus the
// per-algorithm availability rules and the environment overrides (SYMMAR_ALGO, SYMMAR_DISABLE).
#pragma once
#include <cstddef>
#include <cstdint>

#include "plan/table.h"
#include "symmar/symmar.h"

namespace symmar {

/// Algorithms that can serve (dtype, op) on this topology. fallbacks: bits of the fallbacks that
/// are present (nccl for a GPU comm, mpi for a host comm). Rules: PCIe and direct NVLink never get
/// multimem; no multicast removes only multimem; an unknown link gets only the fallback; GPU
/// kernels serve f32/f16/bf16 (i32/f64 go to the fallback); multimem has no f32 min/max.
uint32_t availableAlgos(const symmarTopology_t& topo, symmarDataType_t dtype, symmarRedOp_t op, uint32_t fallbacks);

/// Picks the first entry of the row whose max_bytes covers bytes and that is available (an
/// unavailable multimem is served by twoshot, which needs the same peer access); above the last
/// threshold the fallback; without a fallback the largest available symmetric algorithm (chunked).
/// Returns symmarAlgoAuto when nothing can serve.
symmarAlgo_t chooseAlgo(const TableRow& row, uint32_t available, size_t bytes);

/// SYMMAR_ALGO and SYMMAR_DISABLE, parsed once per process (bad values reported once, ignored).
struct PlanEnv {
  symmarAlgo_t forced = symmarAlgoAuto;
  uint32_t disabled = 0;
};
const PlanEnv& planEnv();
/// Re-reads the variables (tests).
void reloadPlanEnv();

/// The tables symmarPlan uses: built-in plus SYMMAR_TABLE_FILE, loaded once. On a bad file returns
/// its error (again on every call) and leaves *tables null.
symmarResult_t processTables(const Tables** tables);
/// Drops the cached process tables so the next call reloads them (tests).
void resetProcessTables();

/// Full decision for one request: forced algorithm (if available), else the table.
symmarAlgo_t planRequest(const TableRow& row, const symmarTopology_t& topo, uint32_t fallbacks, size_t count,
                         symmarDataType_t dtype, symmarRedOp_t op);

/// Logs once per (capability, link) which row serves a capability that has no row of its own.
void noteRowServed(int cc_major, int cc_minor, symmarLink_t link, const TableRow& row);

}  // namespace symmar

// symmarCommDescribe's line: backend, topology, the table row in use and what of it this comm runs.
#include <cstdint>
#include <string>

#include "api/comm.h"
#include "core/names.h"
#include "host/simd_reduce.h"
#include "plan/planner.h"

namespace symmar {
namespace {

std::string bytesText(uint64_t b) {
  if (b == kUnbounded) return "unbounded";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

/// The row's entries, each marked where this comm cannot run it. The row is shared by every comm
/// of its key; what this comm can run is not (a Python or engine comm has no mpi fallback,
/// SYMMAR_DISABLE): the line tells what runs rather than what the table would like.
std::string entriesText(const symmarComm& comm, const TableRow& row) {
  const uint32_t fallbacks = comm.fallbacks(row.coll);
  uint32_t runnable = 0;
  for (int d = 0; d < symmarNumTypes; ++d) {
    for (int o = 0; o < symmarNumOps; ++o) {
      const Request request{static_cast<symmarDataType_t>(d), static_cast<symmarRedOp_t>(o), 0, row.coll,
                            comm.placement.hosts};
      runnable |= availableAlgos(comm.topo, request, fallbacks);
    }
  }
  std::string text;
  for (int i = 0; i < row.num_entries; ++i) {
    const symmarAlgo_t algo = row.entries[i].algo;
    text += std::string(i ? ", " : " ") + symmarAlgoName(algo) + "<=" + bytesText(row.entries[i].max_bytes);
    if (row.entries[i].min_elem_bytes) text += " (" + std::to_string(row.entries[i].min_elem_bytes) + "+ B dtypes)";
    if (runnable & algoBit(algo)) continue;
    // The reason for a reduction every algorithm's kernels take (the refusal is then not the dtype's).
    const Request request{symmarFloat16, symmarSum, 0, row.coll, comm.placement.hosts};
    const char* why = refusalText(refusalOf(algo, comm.topo, request, fallbacks));
    text += (algo == symmarAlgoMultimem && (runnable & algoBit(symmarAlgoTwoShot)) ? " (runs twoshot here: "
                                                                                     : " (not on this comm: ") +
            std::string(why) + ")";
  }
  return text.empty() ? " none (the fallback serves; without one, a symmetric form)" : text;
}

}  // namespace

std::string describeComm(const symmarComm& comm) {
  const TableRow& row = comm.row();
  std::string text = std::string(comm.gpu() ? "cuda" : "host") + " backend, link " + linkName(comm.topo.link) +
                     ", cc " + std::to_string(comm.topo.cc_major) + "." + std::to_string(comm.topo.cc_minor) +
                     ", multicast " + std::to_string(comm.topo.multicast) + ", staging " +
                     bytesText(comm.settings.staging_bytes) +
                     // Host reductions' speed depends on the SIMD target the CPU runs (AVX2, AVX-512, NEON...).
                     (comm.gpu() ? "" : std::string(", simd ") + simdReduceTargetName(simdReduceCurrentTarget())) +
                     "; row " + archKeyName(row.arch) + "/" + linkName(row.link) + "/" + std::to_string(row.world) +
                     (row.hosts > 1 ? " per host x " + std::to_string(row.hosts) + " hosts" : "") + ":";
  text += entriesText(comm, row) + " (" + row.source + ")";
  // The other collectives' rows (resolved from the same key), sized by the whole buffer.
  for (Collective coll : {Collective::kReduceScatter, Collective::kAllGather}) {
    text += std::string("; ") + collectiveName(coll) + " (whole buffer):" + entriesText(comm, comm.row(coll));
  }
  // The fused call's forms are the allreduce's, and so is what this comm can run of them.
  TableRow fused = comm.row(Collective::kAddRmsNorm);
  fused.coll = Collective::kAllReduce;
  text += std::string("; ") + collectiveName(Collective::kAddRmsNorm) + ":" +
          (fused.num_entries > 0 ? entriesText(comm, fused) : " as the allreduce's row");
  text += describeHosts(comm);
  if (!comm.checks.empty()) text += "; checks: " + comm.checks;
  return text;
}

}  // namespace symmar

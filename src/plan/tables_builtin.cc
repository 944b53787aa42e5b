// The compiled-in size tables (the architecture traits are kArchTraits, in arch.cc). Each spec
// covers one (arch, link) over a range of world sizes and names the public measurement or table
// its numbers come from; symmar_tune output replaces them. docs/tables.md renders the same data
// (regenerate it with build/tools/symmar_tables; the ctest tables_doc_is_current fails while it is
// stale).
//
// Rows may be sparse: a key without a row is served by the lookup chain (exact -> family -> default,
// Tables::resolve), so an arch needs rows only where its numbers differ from what the chain gives.
// Adding an architecture is an edit of data only: its rows here, and a kArchTraits line in
// plan/arch.cc if its multimem support differs from the PTX rule or it should be listed without rows.
#include <cstdint>
#include <iterator>
#include <vector>

#include "plan/arch.h"
#include "plan/table.h"

namespace symmar {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;
constexpr symmarAlgo_t ONE = symmarAlgoOneShot;
constexpr symmarAlgo_t TWO = symmarAlgoTwoShot;
constexpr symmarAlgo_t MULTIMEM = symmarAlgoMultimem;
constexpr symmarAlgo_t LAMPORT = symmarAlgoLamport;

struct Spec {
  int arch;
  symmarLink_t link;
  int world_min, world_max;
  TableEntry entries[kMaxTableEntries];
  const char* source;
  int hosts = 1;  // a row for comms spanning this many hosts (world = ranks per host)
  Collective coll = Collective::kAllReduce;
};

constexpr Collective RS = Collective::kReduceScatter;
constexpr Collective AG = Collective::kAllGather;
constexpr Collective FUSED = Collective::kAddRmsNorm;

constexpr symmarLink_t SW = symmarLinkNvSwitch;
constexpr symmarLink_t NVL = symmarLinkNvLink;
constexpr symmarLink_t PCI = symmarLinkPcie;
constexpr symmarLink_t NOP2P = symmarLinkPcieNoP2P;

// GPUs without peer access stage through pinned host memory (no measurement yet; a cost model).
// PCIe Gen5 x16 moves ~50 GB/s each way and a crossing costs ~1 us. One-shot: each rank writes its
// N bytes to host memory and reads all W inputs back, (1 + W) N bytes and 2 crossings; two-shot:
// write N, read W slices of N/W, write its reduced slice, read the other W - 1 slices, ~3N bytes
// and 4 crossings. One-shot wins while (W - 2) N / 50 GB/s < 2 us, i.e. N < ~100 KB / (W - 2), and
// always at W = 2; NCCL's own shared-memory path serves the largest messages.
constexpr const char* kNoP2pSource =
    "cost model: PCIe Gen5 x16 ~50 GB/s per direction, ~1 us per crossing; one-shot (1+W)N bytes, two-shot ~3N "
    "(crossover ~100 KB/(W-2))";

// Two hosts of GPUs (docs/performance/across-hosts.md, cost model for 2 x 8 H100 over 400 Gb/s InfiniBand): a
// one-shot kernel (6.5 us) and NCCL's 2-rank allreduce between hosts (10 us assumed) + S / 50 GB/s
// against NCCL over the whole comm (25 us assumed) + S / 400 GB/s: the hierarchical form wins below
// ~500 KB. Default rows take half of sm90's threshold.
constexpr const char* kTwoHostGpuSource =
    "cost model, 2 x 8 H100 over 400 Gb/s InfiniBand: one-shot kernel 6.5 us + NCCL between hosts 10 us + "
    "S/50 GB/s vs NCCL over all 16 25 us + S/400 GB/s (latencies assumed); crossover ~500 KB";

// Reduce-scatter and all-gather on the host backend against Open MPI (benchmarks/collectives_vs_mpi.py,
// caller send buffers, float32, median of 5 runs at 2 ranks and 3 at 4 ranks, 2-core x86-64 VM,
// 2026-12-02, after the reduce-scatter lost its needless end barrier; docs/performance/host-scatter-gather.md).
// One-shot against Open MPI: collectives_vs_mpi.py, 2026-12-02, float32, caller buffers. The lamport
// forms against one-shot: symmar_perf -A lamport,oneshot,mpi (interleaved in one run), float32,
// caller buffers, 2026-12-02, the same VM.
constexpr const char* kHostReduceScatterSource =
    "collectives_vs_mpi.py, 2026-12-02: one-shot ahead of MPI_Reduce_scatter_block at every size; 2 ranks: "
    "1.6-1.8x at 8-512 B, 2.6-4.4x at 2-32 KiB, 4.1-5.4x from 128 KiB to 32 MiB; symmar_perf, 2026-12-02, 500 "
    "iterations, 3 runs: lamport level with one-shot to 1 KiB and behind above, so one-shot serves every size";
constexpr const char* kHostAllGatherSource =
    "collectives_vs_mpi.py, 2026-12-02: one-shot ahead of or level with MPI_Allgather to 32 KiB; 2 ranks: "
    "1.4-1.6x at 8-512 B, 2.1-4.0x at 2-32 KiB; symmar_perf, 2026-12-02, 500 iterations, 3 runs: lamport "
    "0.26-0.34 us against one-shot's 0.33-0.38 us at 8-256 B, level at 512 B-1 KiB, behind from 2 KiB when timed "
    "call by call; in runs of 10 calls, 2026-12-03, 4 runs: level to 4 KiB, lamport ahead at 8-32 KiB (32 KiB "
    "2.46-2.67 vs 3.38-3.71 us, MPI 4.73-4.97). From 64 KiB one-shot with peers reading the send buffer from its "
    "process (cross-memory attach), collectives_vs_mpi.py -A oneshot,lamport, 2026-12-03, 3 runs of 3: 64 KiB "
    "1.14-1.18x MPI against lamport's 0.90-1.27x, 128 KiB 1.11-1.15x against 0.75-1.03x; -A auto,lamport, 5 runs: "
    "auto 1.08-1.23x at 128 KiB (lamport 0.70-1.05x), 0.86-1.07x at 512 KiB, 1.02-1.06x at 2 MiB, 0.96-1.06x at "
    "8 MiB, 0.90-1.11x at 32 MiB; staged one-shot had been 1.3-1.6x MPI at 512 KiB-2 MiB in the machine's fast "
    "state and 0.20-0.25x in its slow one";
constexpr const char* kHostReduceScatterManyRanksSource =
    "collectives_vs_mpi.py, 2026-12-02, 4 ranks oversubscribed on 2 cores: one-shot 1.1-1.3x MPI to 4 KiB, "
    "1.7-3.5x from 16 KiB to 16 MiB; symmar_perf, 2026-12-02, 3 and 4 ranks on 2 cores, 60 iterations: lamport "
    "1.3-1.6x faster than one-shot to 64 KiB and 1.1-1.4x at 256 KiB (fewer waits for a descheduled peer than a "
    "barrier's); other worlds reuse these";
constexpr const char* kHostAllGatherManyRanksSource =
    "collectives_vs_mpi.py, 2026-12-02, 4 ranks oversubscribed on 2 cores: one-shot 1.1-1.3x MPI to 4 KiB, "
    "1.3-1.7x at 16-256 KiB, level from 1 MiB; symmar_perf, 2026-12-02, 3 and 4 ranks on 2 cores, 60-100 "
    "iterations: lamport 1.2-1.6x faster than one-shot from 12 B to 64 KiB, behind at 256 KiB at 3 ranks; other "
    "worlds reuse these";
// Across hosts: symmar_perf -C, mpirun -np 4 as 2 simulated hosts x 2 ranks (scripts/sim-hosts.sh), the
// link between the simulated hosts MPI over shared memory (docs/performance/across-hosts.md).
constexpr const char* kHostsReduceScatterSource =
    "symmar_perf -C reducescatter, 2 simulated hosts x 2 ranks, float sum, 2026-12-02, 2-3 runs: "
    "MPI_Reduce_scatter_block 13-112 us vs one-shot 39-114 us to 128 KiB (whole buffer); one-shot ahead from "
    "256 KiB: 1.6-1.9x at 256 KiB, 1.4-2.0x at 512 KiB, 2.7-3.1x at 4 MiB, 5.4-5.9x at 32 MiB";
constexpr const char* kHostsAllGatherSource =
    "symmar_perf -C allgather, 2 simulated hosts x 2 ranks, float, 2026-12-02, two runs: MPI_Allgather ahead "
    "of or level with one-shot at every size from 16 B to 32 MiB (one-shot 0.7-1.1x its speed)";
// The fused allreduce + residual + RMSNorm on the host (bytes: the message, tokens x hidden): one-shot
// reads every peer's rows and norms its own copy, two-shot norms a slice and gathers it back. Timed
// in runs of 10 calls per form: timed call by call (each after the other form's call), the 2026-12-02
// measurements had one-shot ahead at 3-8 ranks too.
constexpr const char* kHostFusedSource =
    "symmar_norm_perf -A oneshot,twoshot (runs of 10 calls per form), bf16, ranks as threads on a 2-core x86-64 "
    "VM (AMD EPYC), 2026-12-03, both forms in the staging ring, the two-shot staging only its peers' rows and "
    "publishing in the same pass: hidden 7168, 6 runs in the machine's common state, two-shot ahead 1.09-1.29x "
    "at 2 tokens, level at 3 (0.98-1.05x; 2 rows against 1), 1.26-1.97x at 4-256 tokens, 1.20-1.27x at 384, "
    "0.92-1.22x at 512-768 (6-10 MiB); at hidden 256-4096, 3-4 runs, two-shot ahead 1.15-1.46x at 2 tokens "
    "(1-16 KiB); one-shot ahead at 1 token (3.4-3.6 vs 4.9-5.4 us at hidden 7168), which the planner keeps below "
    "a token per rank; in 2 runs in the machine's slow state one-shot was ahead at every size";
constexpr const char* kHostFusedManyRanksSource =
    "symmar_norm_perf -A oneshot,twoshot (runs of 10 calls per form), hidden 7168 bf16, 3 and 4 ranks as threads "
    "oversubscribed on a 2-core x86-64 VM, 2026-12-03, 1-256 tokens: two-shot ahead or level from 2 tokens in 4 "
    "of 4 runs at 4 ranks (1.1-2.7x from 8 tokens) and ahead or level in 2 of 2 at 3 ranks, at 1 token in 2 of 4 "
    "runs at 4 ranks and 2 of 2 at 3 ranks (the planner keeps the one-shot below a token per rank); worlds 5-8 "
    "reuse it";
// The fused call on GPUs: first H200 run, ranks sharing one GPU (docs/gpu-results.md, 2026-12-04),
// hidden 7168 bf16 against the allreduce + a separate add + RMSNorm kernel: fused ahead 1.26-1.54x
// at 1-8 tokens (up to 112 KiB) at 2, 4 and 8 ranks, level at 16 (0.94-1.14x), behind from 32
// (0.53-0.84x). Kept to 128 KiB (9 tokens of 7168, 16 of 4096) until runs between GPUs widen it;
// the planner also stops at the kernels' grid (BackendFacts::fused_rows_cap).
constexpr const char* kGpuFusedSource =
    "symmar_norm_perf_gpu, H200, 2/4/8 ranks on one GPU, hidden 7168 bf16, 2026-12-04: fused 1.26-1.54x ahead "
    "at 1-8 tokens, 0.94-1.14x at 16, 0.53-0.84x at 32, 0.40-0.47x at 64; one-shot to 128 KiB, unfused past it";
constexpr const char* kGpuScatterGatherSource =
    "no GPU measurement of symmar's reduce-scatter and all-gather kernels yet: NCCL serves (one-shot without NCCL)";

const Spec kSpecs[] = {
    // ---- sm90: H100 / H200 ----
    {90,
     SW,
     2,
     2,
     {{LAMPORT, 64 * KiB}, {ONE, 1 * MiB}, {TWO, 64 * MiB}},
     "lamport: TensorRT-LLM customAllReduceUtils.h SM90 one-shot (Lamport buffers) for 1-32 tokens; vLLM "
     "all_reduce_utils.py 9.0: one-stage always at ws=2 (custom AR), symm-mem two-shot to 64 MiB"},
    {90,
     SW,
     3,
     4,
     {{LAMPORT, 64 * KiB}, {ONE, 512 * KiB}, {MULTIMEM, 32 * MiB}},
     "lamport: MSCCL++ packet (data-with-flag) kernels to 64 KiB; vLLM custom AR one-stage rule (ws<=4, <512 KiB); "
     "vLLM PR 24111 TP4 0.5 MiB one-stage 10us vs multimem 16us; vLLM symm-mem 9.0 ws=4 multimem to 32 MiB"},
    {90,
     SW,
     5,
     6,
     {{LAMPORT, 32 * KiB}, {ONE, 256 * KiB}, {MULTIMEM, 64 * MiB}},
     "lamport: MSCCL++ packet kernels (<= 16-32 KiB); vLLM custom AR one-stage rule (ws<=8, <256 KiB); vLLM "
     "symm-mem 9.0 ws=6 multimem to 64 MiB; PR 24111 TP6 multimem 21us vs NCCL 43us at 2 MiB"},
    {90,
     SW,
     7,
     8,
     {{LAMPORT, 16 * KiB}, {ONE, 64 * KiB}, {MULTIMEM, 64 * MiB}},
     "lamport: NCCL symmetric cost model H100x8, one-shot LL (flags with the data) 6.7us at 14 KiB; vLLM PR "
     "33839 custom AR wins to 64 KiB; vLLM symm-mem 9.0 ws=8 multimem to 64 MiB"},
    {90, NVL, 2, 2, {{ONE, 1 * MiB}, {TWO, 64 * MiB}}, "vLLM custom AR 9.0 ws=2 (P2P kernels, no multicast)"},
    {90,
     NVL,
     3,
     8,
     {{ONE, 256 * KiB}, {TWO, 16 * MiB}},
     "vLLM custom AR 9.0 one-stage rule (<256 KiB) and two-stage above; capped at 16 MiB without a switch"},
    {90,
     PCI,
     2,
     8,
     {{ONE, 64 * KiB}, {TWO, 2 * MiB}},
     "vLLM fork custom_all_reduce.cuh: over PCIe one-stage wins only below 64 KiB; two-shot to 2 MiB"},

    // ---- sm100: B200 ----
    {100,
     SW,
     2,
     2,
     {{LAMPORT, 64 * KiB}, {ONE, 256 * KiB}},
     "lamport: TensorRT-LLM SM100 one-shot (Lamport buffers) from 1 token; vLLM PR 42324 B200 ws=2: NCCL wins "
     "at 512 KiB (13us vs 16-17us), so symmetric only below"},
    {100,
     SW,
     3,
     4,
     {{LAMPORT, 64 * KiB}, {ONE, 1 * MiB}, {TWO, 32 * MiB}},
     "lamport: TensorRT-LLM SM100 one-shot (Lamport) to 128 tokens, the flag-free form below 64 KiB; "
     "TensorRT-LLM customAllReduceUtils.h SM100: one-shot to 128 tokens; vLLM symm-mem 10.0 ws=4 to 32 MiB"},
    {100,
     SW,
     5,
     8,
     {{LAMPORT, 32 * KiB}, {ONE, 256 * KiB}, {MULTIMEM, 128 * MiB}},
     "lamport: NCCL cost model B200x8, LL (flags with the data) 12.3us at 1-2 tokens; vLLM custom AR rule "
     "(<256 KiB); vLLM symm-mem 10.0 ws=6,8 multimem to 128 MiB"},
    {100,
     NVL,
     2,
     8,
     {{ONE, 256 * KiB}, {TWO, 8 * MiB}},
     "vLLM custom AR 10.0 (1-2 MiB P2P), conservative without a switch"},
    {100, PCI, 2, 8, {{ONE, 64 * KiB}, {TWO, 2 * MiB}}, "as sm90 pcie: one-stage wins only below 64 KiB over PCIe"},

    // ---- sm103: B300 ----
    {103,
     SW,
     2,
     2,
     {{LAMPORT, 64 * KiB}, {ONE, 4 * MiB}},
     "lamport: as sm100 (TensorRT-LLM SM100 table serves SM >= 100); vLLM custom AR 10.3 ws=2 to 4 MiB"},
    {103,
     SW,
     3,
     4,
     {{LAMPORT, 64 * KiB}, {ONE, 512 * KiB}, {TWO, 32 * MiB}},
     "lamport: as sm100; vLLM custom AR 10.3 ws=4; vLLM symm-mem 10.3 ws=4 to 32 MiB"},
    {103,
     SW,
     5,
     8,
     {{LAMPORT, 16 * KiB}, {ONE, 1 * MiB}, {MULTIMEM, 32 * MiB}},
     "lamport: below vLLM PR 37756's 16 KiB point (one-stage 7us vs multimem 13us on B300), where a barrier "
     "is most of the call; multimem wins 2-32 MiB; NCCL wins at 64 MiB"},
    // nvlink and pcie: no rows of its own; the family (sm100) rows serve.

    // ---- sm120: RTX PRO 6000 Blackwell / RTX 50 (PCIe, no multicast) ----
    {120,
     PCI,
     2,
     4,
     {{LAMPORT, 1 * KiB}, {ONE, 64 * KiB}, {TWO, 16 * MiB}},
     "lamport: an SM120 topology report (peer writes ~2.6 GB/s vs reads ~52 GB/s), so pushing pays only below "
     "~1 KiB where the barrier's crossings dominate; vLLM fork: one-stage wins only below 64 KiB on RTX PRO 6000; "
     "SGLang pcie_ipc_ar.py 8x SM120: P2P kernel 5.3us vs NCCL 205us at 12 KiB, 34.6 vs 1169us at 384 KiB"},
    {120,
     PCI,
     5,
     8,
     {{LAMPORT, 1 * KiB}, {ONE, 32 * KiB}, {TWO, 16 * MiB}},
     "lamport: as ws 2-4 (SM120 peer writes ~2.6 GB/s); SGLang pcie_ipc_ar.py 8x SM120 (symmetric 34-40x faster "
     "than NCCL to 384 KiB); one-shot halved for the (N-1)S reads over PCIe"},
    {120, NVL, 2, 8, {{ONE, 256 * KiB}, {TWO, 16 * MiB}}, "SGLang custom_all_reduce_v2 conservative default"},
    {120, NOP2P, 2, 2, {{ONE, 1 * MiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {120, NOP2P, 3, 4, {{ONE, 64 * KiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {120, NOP2P, 5, 8, {{ONE, 16 * KiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {120, SW, 2, 8, {{ONE, 256 * KiB}, {TWO, 16 * MiB}}, "SGLang custom_all_reduce_v2 conservative default"},

    // ---- sm121: GB10 (DGX Spark): no rows of its own; the family (sm120) rows serve ----

    // ---- across 2 hosts (world = GPUs per host): a kernel within the host, then NCCL between ----
    {90, SW, 2, 8, {{ONE, 256 * KiB}}, kTwoHostGpuSource, 2},

    // ---- default: any GPU without a row of its own ----
    {kArchDefault,
     SW,
     2,
     4,
     {{ONE, 1 * MiB}, {TWO, 16 * MiB}},
     "SGLang configs/custom_all_reduce_v2.py default: one-shot 1 MiB, two-shot 16 MiB, no multicast"},
    {kArchDefault,
     SW,
     5,
     8,
     {{ONE, 256 * KiB}, {TWO, 16 * MiB}},
     "SGLang custom_all_reduce_v2 default, one-shot capped by vLLM's ws>4 rule (<256 KiB)"},
    {kArchDefault, NVL, 2, 4, {{ONE, 1 * MiB}, {TWO, 16 * MiB}}, "SGLang custom_all_reduce_v2 default"},
    {kArchDefault,
     NVL,
     5,
     8,
     {{ONE, 256 * KiB}, {TWO, 16 * MiB}},
     "SGLang custom_all_reduce_v2 default, vLLM ws>4 rule"},
    {kArchDefault, NOP2P, 2, 2, {{ONE, 1 * MiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {kArchDefault, NOP2P, 3, 4, {{ONE, 64 * KiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {kArchDefault, NOP2P, 5, 8, {{ONE, 16 * KiB}, {TWO, 64 * MiB}}, kNoP2pSource},
    {kArchDefault,
     PCI,
     2,
     8,
     {{ONE, 64 * KiB}, {TWO, 4 * MiB}},
     "PCIe default: one-stage below 64 KiB (vLLM fork), two-shot through the decode range (SGLang pcie_ipc_ar.py)"},
    {kArchDefault, SW, 2, 8, {{ONE, 128 * KiB}}, kTwoHostGpuSource, 2},
    {kArchDefault, NVL, 2, 8, {{ONE, 128 * KiB}}, kTwoHostGpuSource, 2},
    {kArchDefault, PCI, 2, 8, {{ONE, 128 * KiB}}, kTwoHostGpuSource, 2},

    // ---- host backend (CPU ranks over shared memory) ----
    {kArchHost,
     symmarLinkHostMemory,
     2,
     2,
     {{LAMPORT, 64}, {ONE, 32 * KiB}, {TWO, kUnbounded}},
     "2-core Zen 4 VM, 2026-12-07, in place on torch tensors as engines call, the machine's handoff state "
     "(benchmarks/machine_state.py) printed beside each run. Inside vLLM's TP=2 CPU workers "
     "(benchmarks/engines/vllm_decode.py, SYMMAR_ALGO forcing each form, slow state): one-shot 4.2 us against "
     "two-shot 5.6 at 8 KiB bf16, 4.5/4.9 at 16 KiB, 6.3/6.8 at 32 KiB, 10.2/10.1 at 64 KiB, worse from 128 KiB; "
     "float32 5.5/6.4 at 32 KiB, 8.6/8.4 at 64 KiB. compare_cpu_allreduce.py --bind, 3 pairs of runs: fast state "
     "bf16 one-shot 3.1-3.2/3.9-4.1/4.7-5.6 us against 3.7-4.3/4.0-5.1/4.9-5.0 at 8/16/32 KiB, float32 "
     "4.1-4.4 against 4.9-6.4 at 32 KiB; slow state bf16 3.2/5.1/6.6 against 4.1/5.3/6.8. Earlier, "
     "symmar_perf -A oneshot,twoshot --hot (a separate output), 2026-12-06/07: two-shot / one-shot 1.28-1.43x "
     "(float) and 1.14-1.41x (bf16) at 512 B-4 KiB, float 0.98-1.16x at 32 KiB, 0.70-0.73x from 64 KiB, bf16 "
     "0.89-0.93x at 8 KiB, double 0.90-0.97x at 16 KiB (the one cost of one row for every dtype); lamport: "
     "symmar_perf mpirun -np 2, float sum, 2026-11-30: 0.14 us vs oneshot 0.16-0.18 vs mpi 0.22-0.23 at 4-64 B, "
     "oneshot ahead from 256 B"},
    {kArchHost,
     symmarLinkHostMemory,
     3,
     3,
     {{LAMPORT, 64}, {ONE, 1 * KiB}, {TWO, kUnbounded}},
     "symmar_tune, 2 ranks, float, margin 0.1, on a 2-core x86-64 VM (AMD EPYC), 2026-11-29 (3 ranks do not fit "
     "its 2 cores unshared: the 2-rank row of that day); lamport as at 2 ranks"},
    {kArchHost,
     symmarLinkHostMemory,
     4,
     8,
     {{ONE, 64 * KiB}, {TWO, kUnbounded}},
     "symmar_tune, 4 ranks oversubscribed on 2 cores, float, margin 0.1, 2026-11-29; lamport measured 2026-11-30 "
     "at 15 us vs mpi 13 us at 4 B there, so no lamport; no mpi since calls it serves meet at a barrier first "
     "(symmar_perf -A oneshot,lamport,mpi, 4-1024 B, 2026-12-05: oneshot 24-37 us vs mpi 26-42 at 4 ranks, "
     "3 runs; 52-78 vs 77-107 at 8 ranks, 2 runs)"},

    // ---- host backend: reduce-scatter and all-gather (bytes: the whole buffer; no two-shot form:
    // one-shot is the direct form over shared memory, lamport the one without a barrier) ----
    {kArchHost, symmarLinkHostMemory, 2, 2, {{ONE, kUnbounded}}, kHostReduceScatterSource, 1, RS},
    {kArchHost,
     symmarLinkHostMemory,
     2,
     2,
     {{LAMPORT, 512}, {ONE, 4 * KiB}, {LAMPORT, 32 * KiB}, {ONE, kUnbounded}},
     kHostAllGatherSource,
     1,
     AG},
    {kArchHost,
     symmarLinkHostMemory,
     3,
     8,
     {{LAMPORT, 256 * KiB}, {ONE, kUnbounded}},
     kHostReduceScatterManyRanksSource,
     1,
     RS},
    {kArchHost,
     symmarLinkHostMemory,
     3,
     8,
     {{LAMPORT, 64 * KiB}, {ONE, kUnbounded}},
     kHostAllGatherManyRanksSource,
     1,
     AG},
    // Across hosts (world = ranks per host; without the mpi fallback one-shot serves every size).
    {kArchHost,
     symmarLinkHostMemory,
     2,
     8,
     {{symmarAlgoMpi, 128 * KiB}, {ONE, kUnbounded}},
     kHostsReduceScatterSource,
     2,
     RS},
    {kArchHost, symmarLinkHostMemory, 2, 8, {{symmarAlgoMpi, kUnbounded}}, kHostsAllGatherSource, 2, AG},

    // ---- host backend: the fused allreduce + residual + RMSNorm ----
    {kArchHost, symmarLinkHostMemory, 2, 2, {{TWO, 6 * MiB}, {ONE, kUnbounded}}, kHostFusedSource, 1, FUSED},
    {kArchHost, symmarLinkHostMemory, 3, 8, {{TWO, kUnbounded}}, kHostFusedManyRanksSource, 1, FUSED},

    // ---- GPUs: the fused allreduce + residual + RMSNorm (unfused past the last threshold) ----
    {kArchDefault, SW, 2, 8, {{ONE, 128 * KiB}}, kGpuFusedSource, 1, FUSED},
    {kArchDefault, NVL, 2, 8, {{ONE, 128 * KiB}}, kGpuFusedSource, 1, FUSED},
    {kArchDefault, PCI, 2, 8, {{ONE, 128 * KiB}}, kGpuFusedSource, 1, FUSED},
    {kArchDefault, NOP2P, 2, 8, {{ONE, 128 * KiB}}, kGpuFusedSource, 1, FUSED},

    // ---- GPUs: reduce-scatter and all-gather. No row names a kernel until one has been measured
    // on a GPU: NCCL serves, and one-shot where a comm has no NCCL ----
    {kArchDefault, SW, 2, 8, {}, kGpuScatterGatherSource, 1, RS},
    {kArchDefault, NVL, 2, 8, {}, kGpuScatterGatherSource, 1, RS},
    {kArchDefault, PCI, 2, 8, {}, kGpuScatterGatherSource, 1, RS},
    {kArchDefault, NOP2P, 2, 8, {}, kGpuScatterGatherSource, 1, RS},
    {kArchDefault, SW, 2, 8, {}, kGpuScatterGatherSource, 1, AG},
    {kArchDefault, NVL, 2, 8, {}, kGpuScatterGatherSource, 1, AG},
    {kArchDefault, PCI, 2, 8, {}, kGpuScatterGatherSource, 1, AG},
    {kArchDefault, NOP2P, 2, 8, {}, kGpuScatterGatherSource, 1, AG},

    // ---- host backend across hosts (world = ranks per host; 2-host rows stand in for more hosts) ----
    {kArchHost,
     symmarLinkHostMemory,
     2,
     8,
     {{symmarAlgoMpi, 1 * KiB}, {ONE, 16 * KiB}, {TWO, kUnbounded}},
     "symmar_perf, mpirun -np 4 as 2 simulated hosts x 2 ranks (scripts/sim-hosts.sh) on a 2-core x86-64 VM, "
     "float sum, 2026-11-30, two runs: MPI_Allreduce 4-12 us vs one-shot 12-17 us to 1 KiB; one-shot and "
     "two-shot even at 4-16 KiB, two-shot ahead from 64 KiB; two-shot vs MPI 0.8-1.3x at 1 MiB, 1.2-1.5x at "
     "4 MiB, 1.4-1.6x at 16 MiB, 3.0x at 64 MiB. The link between the simulated hosts is shared memory "
     "(docs/performance.md)",
     2},
};

Tables makeBuiltin() {
  Tables tables;
  for (const Spec& spec : kSpecs) {
    for (int w = spec.world_min; w <= spec.world_max; ++w) {
      TableRow row;
      row.coll = spec.coll;
      row.arch = spec.arch;
      row.link = spec.link;
      row.world = w;
      row.hosts = spec.hosts;
      for (const TableEntry& e : spec.entries) {
        if (e.max_bytes == 0) break;
        row.entries[row.num_entries++] = e;
      }
      row.source = spec.source;
      tables.put(row);
    }
  }
  return tables;
}

}  // namespace


const Tables& Tables::builtin() {
  static const Tables kBuiltin = makeBuiltin();
  return kBuiltin;
}

}  // namespace symmar

// Launched by mpirun as `symmar_hier_tests L`: ranks pretend to sit on hosts of L ranks each
// (SYMMAR_HOST_ID from the MPI rank, set before symmarCommInitMpi), so one machine runs the
// hierarchical path. Every dtype x op x algorithm x count, in and out of place, against
// MPI_Allreduce of the same inputs (the float64 reference for f16/bf16, which MPI lacks): bitwise
// for max/min and int32 sum, within a stated tolerance for float sums, and bitwise identical on
// every rank. Then a rank on the last host that arrives after the timeout: every rank must report
// a failure within the timeout, none may hang or succeed. With unequal hosts (world % L != 0) the
// comm must say it runs flat and still be right. `symmar_hier_tests L stopped` runs only the case of
// a rank stopped mid-exchange and resumed after its peers gave up (stoppedRank).
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/reference.h"
#include "symmar/symmar_mpi.h"

namespace {

int g_rank = 0, g_world = 0;

double valueOf(symmarDataType_t t, const unsigned char* p) { return testref::loadElement(p, t, 0); }

/// Fractional values (sums round differently in another order) for floats, mixed signs for int32.
std::vector<unsigned char> input(symmarDataType_t t, size_t count, int rank, uint32_t seed) {
  const size_t es = symmarTypeSize(t);
  std::vector<unsigned char> buf(count * es);
  uint32_t x = seed * 2654435761u + static_cast<uint32_t>(rank) * 40503u + 1;
  for (size_t i = 0; i < count; ++i) {
    x = x * 1664525u + 1013904223u;
    const double v = t == symmarInt32 ? static_cast<double>(static_cast<int32_t>(x >> 8) % 100000)
                                      : (static_cast<double>(x >> 9) / (1 << 23) - 0.5) * 8.0;
    testref::storeElement(buf.data(), t, i, v);
  }
  return buf;
}

/// What MPI_Allreduce gives for the same inputs (types MPI has), else a float64 reduction.
std::vector<double> mpiReference(symmarDataType_t t, symmarRedOp_t op, const std::vector<unsigned char>& in,
                                 size_t count) {
  const size_t es = symmarTypeSize(t);
  std::vector<double> out(count);
  MPI_Op mop = op == symmarSum ? MPI_SUM : (op == symmarMax ? MPI_MAX : MPI_MIN);
  if (t == symmarFloat32 || t == symmarFloat64 || t == symmarInt32) {
    MPI_Datatype mt = t == symmarFloat32 ? MPI_FLOAT : (t == symmarFloat64 ? MPI_DOUBLE : MPI_INT32_T);
    std::vector<unsigned char> res(in.size());
    MPI_Allreduce(in.data(), res.data(), static_cast<int>(count), mt, mop, MPI_COMM_WORLD);
    for (size_t i = 0; i < count; ++i) out[i] = valueOf(t, &res[i * es]);
    return out;
  }
  std::vector<double> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = valueOf(t, &in[i * es]);
  MPI_Allreduce(mine.data(), out.data(), static_cast<int>(count), MPI_DOUBLE, mop, MPI_COMM_WORLD);
  return out;
}

/// Stated tolerance of a float sum: the world's inputs are at most 4 in magnitude, so one rounding
/// of the result per rank (f16/bf16 results are rounded once per host stage and once at the end).
double tolerance(symmarDataType_t t) {
  const double eps =
      t == symmarFloat64 ? 0x1p-52 : (t == symmarFloat32 ? 0x1p-23 : (t == symmarFloat16 ? 0x1p-10 : 0x1p-7));
  return 4.0 * g_world * g_world * eps * 2;
}

bool allAgree(bool ok) {
  int mine = ok ? 0 : 1, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any == 0;
}

const char* typeName(symmarDataType_t t) {
  static const char* names[] = {"f32", "f16", "bf16", "i32", "f64"};
  return names[t];
}

/// One allreduce checked against MPI_Allreduce and across ranks; "" when right. On a flat comm
/// (hosts of unequal size, only the fallback serves) a forced symmetric algorithm must be refused
/// with symmarUnsupported, not run.
std::string checkCase(symmarComm_t comm, bool flat, symmarDataType_t t, symmarRedOp_t op, symmarAlgo_t algo,
                      size_t count, bool in_place, uint32_t seed) {
  const size_t es = symmarTypeSize(t);
  std::vector<unsigned char> in = input(t, count, g_rank, seed), out(count * es, 0xab);
  const std::vector<double> ref = mpiReference(t, op, in, count);
  std::vector<unsigned char> buf = in;
  symmarResult_t res =
      symmarAllReduceAlgo(buf.data(), in_place ? buf.data() : out.data(), count, t, op, algo, comm, nullptr);
  const std::vector<unsigned char>& got = in_place ? buf : out;
  const bool refused = flat && algo != symmarAlgoAuto && algo != symmarAlgoMpi;
  std::string why;
  if (refused) {
    if (res != symmarUnsupported) why = std::string("expected symmarUnsupported, got ") + symmarGetErrorString(res);
  } else if (res != symmarSuccess) {
    why = std::string(symmarGetErrorString(res)) + ": " + symmarGetLastError(comm);
  }
  // max/min pick one input (for f16/bf16 the reference is that input widened) and int32 sums are
  // exact: bitwise. Float sums within the stated tolerance.
  const bool exact = op != symmarSum || t == symmarInt32;
  for (size_t i = 0; why.empty() && !refused && i < count; ++i) {
    const double v = valueOf(t, &got[i * es]);
    if (exact ? v != ref[i] : !(std::fabs(v - ref[i]) <= tolerance(t) * (1 + std::fabs(ref[i])))) {
      why = "element " + std::to_string(i) + ": " + std::to_string(v) + " vs " + std::to_string(ref[i]);
    }
  }
  // Every rank joins the comparison, whatever happened on it.
  uint64_t mine = refused ? 0 : testref::digest(got.data(), got.size());
  std::vector<uint64_t> all(static_cast<size_t>(g_world));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t x : all) {
    if (why.empty() && x != all[0]) why = "ranks differ bitwise";
  }
  return why;
}

int sweep(symmarComm_t comm, bool flat) {
  int failed = 0, passed = 0;
  const symmarAlgo_t algos[] = {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoLamport, symmarAlgoMpi};
  uint32_t seed = 0;
  for (int d = 0; d < symmarNumTypes; ++d) {
    const symmarDataType_t t = static_cast<symmarDataType_t>(d);
    for (int o = 0; o < symmarNumOps; ++o) {
      const symmarRedOp_t op = static_cast<symmarRedOp_t>(o);
      for (symmarAlgo_t algo : algos) {
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(65537), size_t(300001)}) {
          // lamport serves f32/f16/bf16 (its empty-slot pattern is a float's) up to its size limit.
          const size_t es = symmarTypeSize(t);
          const bool lamport_can = (t == symmarFloat32 || es == 2) && count * es <= SYMMAR_LAMPORT_MAX_BYTES;
          if (algo == symmarAlgoLamport && !lamport_can) continue;
          for (bool in_place : {false, true}) {
            std::string why = checkCase(comm, flat, t, op, algo, count, in_place, ++seed);
            if (!why.empty()) {
              fprintf(stderr, "rank %d FAILED: %s %s %s count %zu %s: %s\n", g_rank, symmarAlgoName(algo), typeName(t),
                      op == symmarSum ? "sum" : (op == symmarMax ? "max" : "min"), count,
                      in_place ? "in place" : "out of place", why.c_str());
            }
            if (allAgree(why.empty()))
              ++passed;
            else
              ++failed;
          }
        }
      }
    }
  }
  if (g_rank == 0) printf("sweep: %d passed, %d failed\n", passed, failed);
  return failed;
}

/// Reduce-scatter and all-gather across hosts, by auto (the hosts rows give 16 KiB to the mpi
/// fallback) and by the hierarchical one-shot form (forced; refused on a flat comm), float32 small
/// integers against a hand sum.
int scatterGather(symmarComm_t comm, bool flat) {
  const size_t n = 1001;
  auto input = [](int r, size_t i) { return static_cast<float>(static_cast<int>((r * 7 + i * 3) % 17) - 8); };
  std::vector<float> whole(n * g_world), block(n);
  std::string why;
  for (symmarAlgo_t algo : {symmarAlgoAuto, symmarAlgoOneShot}) {
    const std::string name = algo == symmarAlgoAuto ? "auto" : "one-shot";
    if (flat && algo != symmarAlgoAuto) {
      if (symmarAllGatherAlgo(block.data(), whole.data(), n, symmarFloat32, algo, comm, nullptr) != symmarUnsupported) {
        why = "a forced " + name + " all-gather on a flat comm was not refused";
      }
      continue;
    }
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = input(g_rank, i);
    std::fill(block.begin(), block.end(), 0.0f);
    if (why.empty() && symmarReduceScatterAlgo(whole.data(), block.data(), n, symmarFloat32, symmarSum, algo, comm,
                                               nullptr) != symmarSuccess) {
      why = name + " reduce-scatter: " + symmarGetLastError(comm);
    }
    for (size_t j = 0; why.empty() && j < n; ++j) {
      float want = 0;
      for (int r = 0; r < g_world; ++r) want += input(r, static_cast<size_t>(g_rank) * n + j);
      if (block[j] != want) why = name + " reduce-scatter element " + std::to_string(j) + " wrong";
    }
    for (size_t j = 0; j < n; ++j) block[j] = input(g_rank, j);
    std::fill(whole.begin(), whole.end(), -100.0f);
    if (why.empty() &&
        symmarAllGatherAlgo(block.data(), whole.data(), n, symmarFloat32, algo, comm, nullptr) != symmarSuccess) {
      why = name + " all-gather: " + symmarGetLastError(comm);
    }
    for (size_t i = 0; why.empty() && i < whole.size(); ++i) {
      if (whole[i] != input(static_cast<int>(i / n), i % n)) {
        why = name + " all-gather element " + std::to_string(i) + " wrong";
      }
    }
  }
  if (!why.empty()) fprintf(stderr, "rank %d FAILED: %s\n", g_rank, why.c_str());
  return allAgree(why.empty()) ? 0 : 1;
}

/// The fused allreduce + residual add + RMSNorm must norm the sum over every host: the result against
/// a float64 computation from MPI_Allreduce of the same inputs (f32, 5 tokens x 96); a forced fused
/// form is refused across hosts.
int fusedNorm(symmarComm_t comm) {
  const size_t tokens = 5, hidden = 96, n = tokens * hidden;
  std::vector<float> in(n), res_in(n), gamma(hidden), res_out(n), norm(n);
  for (size_t i = 0; i < n; ++i) {
    in[i] = static_cast<float>((g_rank + 1) * ((i * 37) % 11)) * 0.125f - 0.5f;
    res_in[i] = static_cast<float>(i % 5) * 0.25f;
  }
  for (size_t j = 0; j < hidden; ++j) gamma[j] = 0.5f + static_cast<float>(j % 3) * 0.25f;
  std::vector<double> in64(in.begin(), in.end()), sum(n);
  MPI_Allreduce(in64.data(), sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  symmarAddRmsNormArgs_t a{in.data(), res_in.data(), res_out.data(), norm.data(), gamma.data(), nullptr,
                           1.0f,      1e-6f,         tokens,         hidden,      symmarFloat32};
  symmarResult_t res = symmarAllReduceAddRmsNorm(&a, comm, nullptr);
  std::string why = res == symmarSuccess ? "" : std::string("fused call: ") + symmarGetLastError(comm);
  for (size_t t = 0; why.empty() && t < tokens; ++t) {
    double ms = 0;
    for (size_t j = 0; j < hidden; ++j) ms += std::pow(sum[t * hidden + j] + res_in[t * hidden + j], 2);
    const double inv = 1.0 / std::sqrt(ms / hidden + 1e-6);
    for (size_t j = 0; j < hidden; ++j) {
      const double r = sum[t * hidden + j] + res_in[t * hidden + j], want = r * inv * gamma[j];
      if (std::fabs(res_out[t * hidden + j] - r) > 1e-5 * (1 + std::fabs(r)) ||
          std::fabs(norm[t * hidden + j] - want) > 1e-5 * (1 + std::fabs(want))) {
        why = "token " + std::to_string(t) + " element " + std::to_string(j) + ": norm " +
              std::to_string(norm[t * hidden + j]) + " vs " + std::to_string(want);
        break;
      }
    }
  }
  if (why.empty() && symmarAllReduceAddRmsNormAlgo(&a, symmarAlgoTwoShot, comm, nullptr) != symmarUnsupported) {
    why = "a forced fused form across hosts was not refused";
  }
  if (!why.empty()) fprintf(stderr, "rank %d FAILED: %s\n", g_rank, why.c_str());
  return allAgree(why.empty()) ? 0 : 1;
}

/// The hosts make different calls while the ranks of each host agree (so only the inter-host stage
/// can tell): another count (records of another length), or the same count with another op (records
/// of the same length, another signature), each in both inter-host forms. No rank may succeed, and
/// every rank must return within the timeout (most at once; a rank whose partner on the other host
/// left early, on its own host's failure, waits out its timeout: no notice crosses hosts).
int crossHostMismatch(const symmarConfig_t& base, int local) {
  int bad = 0;
  const int host = g_rank / local;
  for (size_t count : {size_t(1000), size_t(200000)}) {  // 4 KB and 800 KB
    for (bool other_op : {false, true}) {
      symmarConfig_t cfg = base;
      cfg.timeout_ms = 3000;
      symmarComm_t comm = nullptr;
      if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) return 1;
      std::vector<float> buf(count + 1, 1.0f);
      const size_t n = host == 1 && !other_op ? count + 1 : count;
      const symmarRedOp_t op = host == 1 && other_op ? symmarMax : symmarSum;
      const auto t0 = std::chrono::steady_clock::now();
      symmarResult_t res = symmarAllReduceAlgo(buf.data(), buf.data(), n, symmarFloat32, op, symmarAlgoTwoShot, comm,
                                               nullptr);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool ok = res != symmarSuccess && s < 1.5 * cfg.timeout_ms / 1000;
      if (!ok) {
        fprintf(stderr, "rank %d: hosts calling with another %s (count %zu) returned %s after %.2f s\n", g_rank,
                other_op ? "op" : "count", count, symmarGetErrorString(res), s);
      }
      symmarCommDestroy(comm);
      bad += allAgree(ok) ? 0 : 1;
    }
  }
  if (g_rank == 0) printf("hosts making different calls: %s\n", bad ? "FAILED" : "no rank succeeded");
  return bad;
}

/// The last rank arrives after the timeout; every rank must fail the call within a bound. The ranks
/// of its local index on the other hosts wait for it in the inter-host exchange, its host mates at a
/// barrier, and their messages must name it as the comm does (rank world - 1, on host hosts - 1),
/// not by its index on its host.
int lateRank(const symmarConfig_t& base, int local) {
  symmarConfig_t cfg = base;
  cfg.timeout_ms = 1500;
  symmarComm_t comm = nullptr;
  if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", g_rank, symmarGetLastError(nullptr));
    return 1;
  }
  std::vector<float> buf(size_t{1} << 18, 1.0f);
  const bool late = g_rank == g_world - 1;
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.timeout_ms + 1500));
  const auto t0 = std::chrono::steady_clock::now();
  symmarResult_t res = symmarAllReduceAlgo(buf.data(), buf.data(), buf.size(), symmarFloat32, symmarSum,
                                           symmarAlgoTwoShot, comm, nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool ok = res != symmarSuccess && s < 3.0 * cfg.timeout_ms / 1000;
  if (!ok) fprintf(stderr, "rank %d: late-rank call returned %s after %.2f s\n", g_rank, symmarGetErrorString(res), s);
  const std::string why = symmarGetLastError(comm);
  const std::string names = "rank " + std::to_string(g_world - 1) + " (host " + std::to_string(g_world / local - 1) + ")";
  if (!late && g_rank % local == local - 1 && why.find(names) == std::string::npos) {
    fprintf(stderr, "rank %d: the late rank's partner does not name %s: %s\n", g_rank, names.c_str(), why.c_str());
    ok = false;
  }
  // Its host mates wait for it at their first barrier: they name it by its comm rank too.
  const std::string barrier_names = "rank " + std::to_string(g_world - 1) + " did not arrive at a barrier";
  if (!late && g_rank / local == g_world / local - 1 && why.find(barrier_names) == std::string::npos) {
    fprintf(stderr, "rank %d: the late rank's host mate does not name rank %d: %s\n", g_rank, g_world - 1,
            why.c_str());
    ok = false;
  }
  symmarCommDestroy(comm);
  const bool all = allAgree(ok);
  if (g_rank == 0) printf("late rank: %s\n", all ? "every rank failed the call in time" : "FAILED");
  return all ? 0 : 1;
}

/// A rank stopped (SIGSTOP) in the middle of its inter-host exchange, and resumed (SIGCONT, by rank
/// 0) well after its peers' timeout; they stay out of MPI for a while after failing, as an engine
/// busy with other work would. Run over TCP, where a large record needs its sender to move its data,
/// as between real hosts. No receive may outlast its deadline: not the late partner's receive of the
/// stopped rank's record (matched, but its data waits for the stopped sender), and not the resumed
/// rank's receive of the partner's record (its sender gave up and is out of MPI). Every rank must
/// fail the call within the timeout of the partner's arrival, the stopped one within the timeout of
/// its resumption (its deadline passed while it was stopped), each with a margin.
int stoppedRank(const symmarConfig_t& base, int local) {
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one clock for every process here
  symmarConfig_t cfg = base;
  cfg.timeout_ms = 1500;
  const auto timeout = std::chrono::milliseconds(cfg.timeout_ms);
  symmarComm_t comm = nullptr;
  if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", g_rank, symmarGetLastError(nullptr));
    return 1;
  }
  const int stopped = g_world - 1;  // the last host's last local index
  const int partner = local - 1;    // the same local index on host 0: late, so the stop falls mid-exchange
  int pid = static_cast<int>(getpid());
  std::vector<int> pids(static_cast<size_t>(g_world));
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<float> buf(size_t{1} << 18, 1.0f);  // records far above TCP's eager limit
  MPI_Barrier(MPI_COMM_WORLD);
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point resume_at = t0 + std::chrono::milliseconds(600) + timeout + std::chrono::milliseconds(3000);
  std::thread stopper;
  if (g_rank == stopped) {
    stopper = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      kill(getpid(), SIGSTOP);
    });
  }
  if (g_rank == partner) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const symmarResult_t res = symmarAllReduceAlgo(buf.data(), buf.data(), buf.size(), symmarFloat32, symmarSum,
                                                 symmarAlgoTwoShot, comm, nullptr);
  const Clock::time_point t_end = Clock::now();
  const std::string why = symmarGetLastError(comm);
  if (stopper.joinable()) stopper.join();
  long long resumed_ns = 0;
  if (g_rank == 0) {
    std::this_thread::sleep_until(resume_at);
    resumed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    kill(pids[static_cast<size_t>(stopped)], SIGCONT);
  }
  // No MPI call (destroy frees a communicator) until well after the stopped rank could be done.
  if (g_rank != stopped) std::this_thread::sleep_until(resume_at + timeout + std::chrono::milliseconds(4500));
  symmarCommDestroy(comm);
  MPI_Bcast(&resumed_ns, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  const Clock::time_point resumed{std::chrono::nanoseconds(resumed_ns)};
  const Clock::time_point bound = (g_rank == stopped ? resumed : t0 + std::chrono::milliseconds(600)) + timeout +
                                  std::chrono::milliseconds(1500);
  const bool ok = res != symmarSuccess && t_end < bound;
  if (!ok) {
    fprintf(stderr, "rank %d%s: %s after %.2f s (%.2f s after the resumption): %s\n", g_rank,
            g_rank == stopped ? " (stopped)" : "", symmarGetErrorString(res),
            std::chrono::duration<double>(t_end - t0).count(), std::chrono::duration<double>(t_end - resumed).count(),
            why.c_str());
  }
  const bool all = allAgree(ok);
  if (g_rank == 0) printf("stopped rank: %s\n", all ? "every rank failed the call in time" : "FAILED");
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int local = argc > 1 ? atoi(argv[1]) : 0;
  const bool only_stopped = argc > 2 && std::string(argv[2]) == "stopped";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world);
  if (local < 1) {
    if (g_rank == 0) fprintf(stderr, "usage: symmar_hier_tests RANKS_PER_HOST [stopped]\n");
    MPI_Finalize();
    return 2;
  }
  const std::string id = "simulated-host-" + std::to_string(g_rank / local);
  setenv("SYMMAR_HOST_ID", id.c_str(), 1);
  const bool uniform = g_world % local == 0;
  const int hosts = (g_world + local - 1) / local;

  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  // 1 MiB: the larger counts run through several chunks, each with its own inter-host stage.
  cfg.staging_bytes = 1 << 20;
  cfg.timeout_ms = 60000;
  symmarComm_t comm = nullptr;
  int failed = 0;
  if (only_stopped) {
    failed = uniform && hosts > 1 ? stoppedRank(cfg, local) : 1;
  } else if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
    fprintf(stderr, "rank %d: symmarCommInitMpi: %s\n", g_rank, symmarGetLastError(nullptr));
    failed = 1;
  } else {
    int h = 0, host = 0, lr = 0, ls = 0;
    symmarCommHostLayout(comm, &h, &host, &lr, &ls);
    char text[2048];
    symmarCommDescribe(comm, text, sizeof(text));
    const bool layout_ok = h == hosts && host == g_rank / local && lr == g_rank % local &&
                           ls == (uniform || host < hosts - 1 ? local : g_world % local);
    const bool says = std::string(text).find(uniform ? "hierarchical" : "flat") != std::string::npos;
    if (!layout_ok || !says) {
      fprintf(stderr, "rank %d: layout %d hosts, host %d, local %d/%d; describe: %s\n", g_rank, h, host, lr, ls, text);
      failed = 1;
    }
    if (g_rank == 0) printf("%s\n", text);
    failed += sweep(comm, !uniform);
    failed += fusedNorm(comm);
    failed += scatterGather(comm, !uniform);
    symmarCommDestroy(comm);
    if (uniform) failed += crossHostMismatch(cfg, local);
    if (uniform) failed += lateRank(cfg, local);
  }
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0)
    printf("hierarchical world %d as %d host(s) of %d: %s\n", g_world, hosts, local, total ? "FAILED" : "passed");
  MPI_Finalize();
  return total ? 1 : 0;
}

// The failure contract as one property, checked over randomised schedules rather than case by
// case. A seeded generator gives every rank of a forked comm (on one host, or spread over pretended
// hosts that combine through an inter-host engine) its own sequence of calls (one-shot,
// two-shot, lamport, automatic, the fused call, count 0; shapes at their edges) with per-rank
// perturbations: a mismatched call, a rank late by far more than the timeout, a rank stopped in the
// middle of a call and resumed after its peers gave up, a rank killed. After every call on every
// rank: success implies every peer made the same call and took part in it (and, for a rank late
// far past the timeout, that every peer succeeded: a late rank never completes a call its peers
// failed), and the values equal a float64 reference; every call returns within a bound of the timeout; no rank
// crashes. Calls no perturbation can reach must succeed, so the property is never met by failing
// everything. A failing schedule prints its seed; SYMMAR_SCHEDULE_SEED=<seed> reruns it alone and
// SYMMAR_SCHEDULES=<n> runs more (the default is a short run for CI).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/numeric.h"
#include "fault/shm_inter_host.h"
#include "mp/mp_util.h"

namespace {

enum Kind { kOneShot, kTwoShot, kLamport, kAuto, kFused, kCountZero, kReduceScatter, kAllGather, kKinds };
const char* const kKindNames[] = {"oneshot", "twoshot", "lamport", "auto", "fused", "count0", "reducescatter",
                                  "allgather"};

struct PlannedCall {
  int kind;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;   ///< elements (fused: tokens x hidden)
  size_t hidden;  ///< fused only (0 allowed)
  bool operator==(const PlannedCall& o) const {
    return kind == o.kind && dtype == o.dtype && op == o.op && count == o.count && hidden == o.hidden;
  }
};

/// What happens to one rank at one call, besides the call itself.
struct Perturbation {
  int late_ms = 0;     ///< sleeps before the call
  bool killed = false;  ///< dies before the call
  bool stopped = false; ///< frozen in the middle of the call until its peers have given up
};

constexpr int kTimeoutMs = 500;
constexpr int kLongMs = 3 * kTimeoutMs;  // "late" and "stopped" last this long: well past the timeout

struct Schedule {
  uint32_t seed;
  int world;
  int per_host;  ///< ranks per pretended host (SYMMAR_HOST_ID); world: one host, flat
  std::vector<std::vector<PlannedCall>> calls;         ///< [rank][call]
  std::vector<std::vector<Perturbation>> perturbation;  ///< [rank][call]
  int ncalls() const { return static_cast<int>(calls[0].size()); }
};

/// one_host: 20000 elements (blocks of 40-80 KiB, which an all-gather's peers read from the rank's
/// process) only then; across pretended hosts 5000 instead (the test's inter-host engine carries
/// messages of at most ShmInterHost::kSlotBytes).
PlannedCall randomCall(std::mt19937& rng, bool one_host) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const size_t counts[] = {1, 7, 300, 5000, one_host ? size_t{20000} : size_t{5000}};
  PlannedCall c{pick(kKinds), static_cast<symmarDataType_t>(pick(3)),
                static_cast<symmarRedOp_t>(pick(symmarNumOps)), counts[pick(5)], 0};
  if (c.kind == kAllGather) c.op = symmarSum;  // an all-gather has no op
  if (c.kind == kFused) {
    const size_t tokens[] = {0, 1, 3};
    const size_t hiddens[] = {0, 1, 7, 64};
    c.op = symmarSum;
    c.hidden = hiddens[pick(4)];
    c.count = tokens[pick(3)] * c.hidden;
  }
  if (c.kind == kCountZero) c.count = 0;
  return c;
}

/// An automatic allreduce and a forced one of the same shape are the same call where the planner
/// picks that algorithm, and pair as they should: not "another call" to this test.
bool mayPlanAlike(const PlannedCall& a, const PlannedCall& b) {
  const auto allreduce = [](int kind) { return kind == kOneShot || kind == kTwoShot || kind == kLamport || kind == kAuto; };
  return allreduce(a.kind) && allreduce(b.kind) && (a.kind == kAuto) != (b.kind == kAuto) && a.dtype == b.dtype &&
         a.op == b.op && a.count == b.count;
}

Schedule makeSchedule(uint32_t seed) {
  std::mt19937 rng(seed);
  Schedule s{seed, 2 + static_cast<int>(rng() % 3), 0, {}, {}};
  // One host half the time; else hosts of one rank, or of two when four ranks allow it.
  s.per_host = rng() % 2 ? s.world : (s.world == 4 && rng() % 2 ? 2 : 1);
  const int ncalls = 12;
  std::vector<PlannedCall> base;
  for (int k = 0; k < ncalls; ++k) base.push_back(randomCall(rng, s.per_host == s.world));
  s.calls.assign(static_cast<size_t>(s.world), base);
  s.perturbation.assign(static_cast<size_t>(s.world), std::vector<Perturbation>(static_cast<size_t>(ncalls)));
  // Small delays everywhere (ranks never move in lockstep), then at most two perturbations.
  for (auto& per_rank : s.perturbation)
    for (Perturbation& p : per_rank) p.late_ms = static_cast<int>(rng() % 4);
  const int events = static_cast<int>(rng() % 3);
  for (int e = 0; e < events; ++e) {
    const int r = static_cast<int>(rng() % static_cast<uint32_t>(s.world));
    const int k = static_cast<int>(rng() % static_cast<uint32_t>(ncalls));
    switch (rng() % 4) {
      case 0: {  // another call: another kind, or another count, or count 0
        PlannedCall& c = s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)];
        const PlannedCall before = c;
        while (c == before || mayPlanAlike(c, before)) c = randomCall(rng, s.per_host == s.world);
        break;
      }
      case 1:
        s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].late_ms = kLongMs;
        break;
      case 2:
        s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].stopped = true;
        break;
      default:
        s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].killed = true;
        break;
    }
  }
  return s;
}

/// Rank r's input element i of call k: small integers, exact in every dtype and in their sums.
double inputAt(int r, int k, size_t i) { return static_cast<double>(static_cast<int>((r * 7 + k * 3 + i * 5) % 17) - 8); }

double reduceRef(const Schedule& s, int k, const PlannedCall& c, size_t i) {
  double acc = inputAt(0, k, i);
  for (int r = 1; r < s.world; ++r) {
    const double x = inputAt(r, k, i);
    acc = c.op == symmarSum ? acc + x : c.op == symmarMax ? std::fmax(acc, x) : std::fmin(acc, x);
  }
  return acc;
}

// Per (rank, call) outcome words in memory shared with the parent.
enum Outcome : uint64_t { kNotReached = 0, kSucceeded = 1, kFailed = 2, kWrongValues = 3 };
struct Slots {
  explicit Slots(int world, int ncalls) : words(static_cast<size_t>(world * ncalls * 3 + world)), ncalls(ncalls) {}
  uint64_t& outcome(int r, int k) { return words[static_cast<size_t>((r * ncalls + k) * 3)]; }
  uint64_t& millis(int r, int k) { return words[static_cast<size_t>((r * ncalls + k) * 3 + 1)]; }
  uint64_t& inCall(int r, int k) { return words[static_cast<size_t>((r * ncalls + k) * 3 + 2)]; }
  mp::SharedWords words;
  int ncalls;
};

/// A reduce-scatter (rank r's block of the reduction of every rank's world blocks) or an all-gather
/// (every rank's block at its place), checked against the float64 reference.
symmarResult_t makeScatterGatherCall(symmarComm_t comm, const Schedule& s, int r, int k, bool* wrong) {
  const PlannedCall& c = s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)];
  const size_t n = c.count, es = symmarTypeSize(c.dtype), whole = n * static_cast<size_t>(s.world);
  const bool scatter = c.kind == kReduceScatter;
  std::vector<char> send((scatter ? whole : n) * es + 16), recv((scatter ? n : whole) * es + 16);
  for (size_t i = 0; i < (scatter ? whole : n); ++i) symmar::storeElement(send.data(), c.dtype, i, inputAt(r, k, i));
  // On one host, every other call takes lamport's forms (barrier-free, so their mismatches and
  // failures take other paths); across hosts lamport has no form of these collectives.
  const symmarAlgo_t algo = s.per_host == s.world && k % 2 ? symmarAlgoLamport : symmarAlgoAuto;
  const symmarResult_t res =
      scatter ? symmarReduceScatterAlgo(send.data(), recv.data(), n, c.dtype, c.op, algo, comm, nullptr)
              : symmarAllGatherAlgo(send.data(), recv.data(), n, c.dtype, algo, comm, nullptr);
  if (res != symmarSuccess) return res;
  for (size_t i = 0; i < (scatter ? n : whole); ++i) {
    const double want = scatter ? reduceRef(s, k, c, static_cast<size_t>(r) * n + i)
                                : inputAt(static_cast<int>(i / n), k, i % n);
    if (symmar::loadElement(recv.data(), c.dtype, i) != want) *wrong = true;
  }
  return res;
}

/// One call on rank r; true when the comm said success and the values are right (*wrong set when
/// it said success with wrong values).
symmarResult_t makeCall(symmarComm_t comm, const Schedule& s, int r, int k, bool* wrong) {
  const PlannedCall& c = s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)];
  if (c.kind == kReduceScatter || c.kind == kAllGather) return makeScatterGatherCall(comm, s, r, k, wrong);
  const size_t n = c.count, es = symmarTypeSize(c.dtype);
  std::vector<char> send(n * es + 16), recv(n * es + 16), extra(n * es + 16), gamma(c.hidden * es + 16);
  for (size_t i = 0; i < n; ++i) symmar::storeElement(send.data(), c.dtype, i, inputAt(r, k, i));
  symmarResult_t res;
  if (c.kind == kFused) {
    for (size_t i = 0; i < c.hidden; ++i) symmar::storeElement(gamma.data(), c.dtype, i, 1.0);
    symmarAddRmsNormArgs_t a{};
    a.input = send.data();
    a.residual_out = recv.data();
    a.norm_out = extra.data();
    a.gamma = gamma.data();
    a.eps = 1e-6f;
    a.tokens = c.hidden ? n / c.hidden : 0;
    a.hidden = c.hidden;
    a.dtype = c.dtype;
    res = symmarAllReduceAddRmsNorm(&a, comm, nullptr);
  } else {
    const symmarAlgo_t algo = c.kind == kOneShot   ? symmarAlgoOneShot
                              : c.kind == kTwoShot ? symmarAlgoTwoShot
                              : c.kind == kLamport ? symmarAlgoLamport
                                                   : symmarAlgoAuto;
    res = symmarAllReduceAlgo(send.data(), recv.data(), n, c.dtype, c.op, algo, comm, nullptr);
  }
  if (res == symmarSuccess) {
    for (size_t i = 0; i < n; ++i) {
      if (symmar::loadElement(recv.data(), c.dtype, i) != reduceRef(s, k, c, i)) *wrong = true;
    }
  }
  return res;
}

int runRank(const Schedule& s, int r, const symmarUniqueId& id, Slots* slots, fault::ShmInterHost* engine) {
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.timeout_ms = kTimeoutMs;
  if (s.per_host < s.world) setenv("SYMMAR_HOST_ID", std::to_string(r / s.per_host).c_str(), 1);
  // Odd seeds stage calls in the staging ring at every world (by default only where each rank has
  // a core of its own).
  if (s.seed % 2) setenv("SYMMAR_HOST_STAGING_RING", "1", 1);
  // Each rank writes staging with plain, streaming or timed stores, ranks of one comm differing.
  setenv("SYMMAR_HOST_STREAM", std::to_string((s.seed + static_cast<uint64_t>(r)) % 3).c_str(), 1);
  symmarComm_t comm = nullptr;
  if (symmarCommInitRank(&comm, s.world, id, r, &cfg) != symmarSuccess) return 100;
  if (s.per_host < s.world && engine->install(comm, r) != symmarSuccess) return 101;
  for (int k = 0; k < s.ncalls(); ++k) {
    const Perturbation& p = s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)];
    if (p.killed) raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(p.late_ms));
    const auto start = std::chrono::steady_clock::now();
    __atomic_store_n(&slots->inCall(r, k), 1, __ATOMIC_RELEASE);  // the parent may stop this rank now
    bool wrong = false;
    const symmarResult_t res = makeCall(comm, s, r, k, &wrong);
    slots->millis(r, k) = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    slots->outcome(r, k) = res != symmarSuccess ? kFailed : wrong ? kWrongValues : kSucceeded;
  }
  symmarCommDestroy(comm);
  return 0;
}

/// Forks the ranks, stops and resumes the ones the schedule stops, and returns what went wrong ("").
std::string runSchedule(const Schedule& s) {
  Slots slots(s.world, s.ncalls());
  fault::ShmInterHost engine(s.world);
  symmarUniqueId id;
  if (symmarGetUniqueId(&id) != symmarSuccess) return "no unique id";
  std::vector<pid_t> pids;
  for (int r = 0; r < s.world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(runRank(s, r, id, &slots, &engine));
    pids.push_back(pid);
  }
  // Stop a rank shortly after it entered the planned call, resume it after its peers' timeout.
  std::vector<int> statuses(static_cast<size_t>(s.world), 0);
  std::vector<bool> reaped(static_cast<size_t>(s.world), false);
  for (int r = 0; r < s.world; ++r) {
    for (int k = 0; k < s.ncalls() && !reaped[static_cast<size_t>(r)]; ++k) {
      if (!s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].stopped) continue;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (__atomic_load_n(&slots.inCall(r, k), __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pids[static_cast<size_t>(r)], &statuses[static_cast<size_t>(r)], WNOHANG) != 0) {
          reaped[static_cast<size_t>(r)] = true;  // it ended before that call (killed, or its comm failed early)
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (reaped[static_cast<size_t>(r)]) break;
      kill(pids[static_cast<size_t>(r)], SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(kLongMs));
      kill(pids[static_cast<size_t>(r)], SIGCONT);
    }
  }
  std::string err;
  for (int r = 0; r < s.world; ++r) {
    int status = statuses[static_cast<size_t>(r)];
    if (!reaped[static_cast<size_t>(r)]) waitpid(pids[static_cast<size_t>(r)], &status, 0);
    bool planned_kill = false;
    for (const Perturbation& p : s.perturbation[static_cast<size_t>(r)]) planned_kill = planned_kill || p.killed;
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && planned_kill;
    if (!clean && !killed && err.empty()) {
      err = "rank " + std::to_string(r) + " ended badly (status " + std::to_string(status) + ")";
    }
  }
  if (!err.empty()) return err;

  // Whether anything could have disturbed call k (on any rank, at any call up to k).
  auto disturbedUpTo = [&](int k) {
    for (int j = 0; j <= k; ++j) {
      for (int r = 0; r < s.world; ++r) {
        const Perturbation& p = s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(j)];
        if (p.killed || p.stopped || p.late_ms >= kLongMs) return true;
        if (!(s.calls[static_cast<size_t>(r)][static_cast<size_t>(j)] == s.calls[0][static_cast<size_t>(j)])) return true;
      }
    }
    return false;
  };
  // Calls pair by their place in the order (the signature carries it). A mismatch between barrier
  // calls is refused on every rank and the comm goes on (all passed the same barrier); one that
  // involves lamport fails the comm. Either way a success needs the same call at this place.
  auto sameCallAt = [&](int k) {
    for (int r = 1; r < s.world; ++r) {
      if (!(s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)] == s.calls[0][static_cast<size_t>(k)])) return false;
    }
    return true;
  };
  for (int k = 0; k < s.ncalls(); ++k) {
    for (int r = 0; r < s.world; ++r) {
      const uint64_t o = slots.outcome(r, k);
      const std::string at = "rank " + std::to_string(r) + " call " + std::to_string(k) + " (" +
                             kKindNames[s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)].kind] + ")";
      if (o == kWrongValues) return at + ": success with wrong values";
      if (o == kSucceeded) {
        if (!sameCallAt(k)) {
          std::string outcomes;
          for (int p = 0; p < s.world; ++p) outcomes += " " + std::to_string(slots.outcome(p, k));
          return at + ": success although a peer made another call (outcomes by rank:" + outcomes + ")";
        }
        // Every peer took part. A peer may still fail the call after its part was done (it waited
        // on a third rank that was frozen): outcomes need not agree across ranks, any more than two
        // generals can agree over a lossy link. But a rank its peers may have given up on (late far
        // past the timeout) succeeds only if every peer did: it must not complete a call they failed.
        const bool late = s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].late_ms >= kLongMs;
        for (int p = 0; p < s.world; ++p) {
          if (slots.outcome(p, k) == kNotReached) return at + ": success although rank " + std::to_string(p) + " never made it";
          if (late && slots.outcome(p, k) != kSucceeded) {
            return at + ": success of a late rank although rank " + std::to_string(p) + " had failed the call";
          }
        }
      }
      if (o == kNotReached) continue;
      const bool self_stopped = s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)].stopped;
      if (!self_stopped && slots.millis(r, k) > static_cast<uint64_t>(3 * kTimeoutMs + 1000)) {
        return at + ": took " + std::to_string(slots.millis(r, k)) + " ms, beyond its bound";
      }
      if (!disturbedUpTo(k) && o != kSucceeded) return at + ": failed although nothing disturbed it";
    }
  }
  return "";
}

/// The schedule's calls where ranks differ and its perturbations, for the failure message.
std::string describe(const Schedule& s) {
  std::string out;
  for (int k = 0; k < s.ncalls(); ++k) {
    for (int r = 0; r < s.world; ++r) {
      const PlannedCall& c = s.calls[static_cast<size_t>(r)][static_cast<size_t>(k)];
      const Perturbation& p = s.perturbation[static_cast<size_t>(r)][static_cast<size_t>(k)];
      const bool differs = !(c == s.calls[0][static_cast<size_t>(k)]);
      if (r == 0 || differs || p.killed || p.stopped || p.late_ms >= kLongMs) {
        out += "\n  call " + std::to_string(k) + " rank " + std::to_string(r) + ": " + kKindNames[c.kind] + " dtype " +
               std::to_string(c.dtype) + " op " + std::to_string(c.op) + " count " + std::to_string(c.count) +
               (c.kind == kFused ? " hidden " + std::to_string(c.hidden) : "") + (p.killed ? " KILLED" : "") +
               (p.stopped ? " STOPPED" : "") + (p.late_ms >= kLongMs ? " LATE" : "");
      }
    }
  }
  return out;
}

int schedules() {
  const char* v = std::getenv("SYMMAR_SCHEDULES");
  return v && *v ? std::atoi(v) : 24;
}

TEST(ScheduleProperty, SuccessOnlyForCallsEveryPeerMadeAndTookPartIn) {
  const char* one = std::getenv("SYMMAR_SCHEDULE_SEED");
  const uint32_t first = one && *one ? static_cast<uint32_t>(std::strtoul(one, nullptr, 10)) : 1;
  const int n = one && *one ? 1 : schedules();
  for (int i = 0; i < n; ++i) {
    const Schedule s = makeSchedule(first + static_cast<uint32_t>(i));
    const std::string err = runSchedule(s);
    ASSERT_EQ(err, "") << "seed " << s.seed << " (world " << s.world << ", " << s.world / s.per_host << " hosts"
                       << "); rerun it alone with SYMMAR_SCHEDULE_SEED=" << s.seed << describe(s);
  }
}

}  // namespace

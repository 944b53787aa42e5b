#include "host_call_checks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <thread>

#include "common/reference.h"
#include "e4m3_reference.h"

namespace hostcalls {
namespace {

// Counts around and across the staging ring's limits (float32: 8 KiB is 2048 elements, a quarter of the
// ring 262144), odd ones included.
constexpr size_t kCounts[] = {2047, 2048, 5000, 16411, 65536, 262144, 262145, 300000};

// Blocks (elements per rank) of the reduce-scatters and all-gathers, around and across the ring's
// limits: a reduce-scatter takes the ring from a float32 block of 2048 (8 KiB, what a peer reads)
// to whole buffers of 1 MiB (131072 at 2 ranks), an all-gather from a block of 4096 to 262144.
constexpr size_t kBlocks[] = {2047, 2048, 4095, 4096, 5000, 16411, 65536, 131072, 131073};

}  // namespace

// Small integers: exact in bfloat16, and so are their sums over a few ranks.
double inputAt(int rank, size_t i, int call) { return static_cast<double>((rank * 7 + i * 3 + call * 5) % 17) - 8; }

// Every rank runs rounds x kCounts allreduces (one-shot and two-shot by turns, float32 and bfloat16,
// in place every third call) and checks every element against the sum in double; returns the
// wrong calls.
int allReduceCalls(symmarComm_t comm, int rank, int world, int rounds) {
  return allReduceCalls(comm, rank, world, rounds, std::vector<size_t>(std::begin(kCounts), std::end(kCounts)));
}

int allReduceCalls(symmarComm_t comm, int rank, int world, int rounds, const std::vector<size_t>& counts) {
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t count : counts) {
      const symmarDataType_t dt = call % 2 ? symmarBfloat16 : symmarFloat32;
      const bool in_place = call % 3 == 0;
      const symmarAlgo_t algo = call % 4 < 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
      std::vector<float> send(count), recv(count);  // room for count elements of either dtype
      for (size_t i = 0; i < count; ++i) testref::storeElement(send.data(), dt, i, inputAt(rank, i, call));
      void* out = in_place ? send.data() : recv.data();
      if (symmarAllReduceAlgo(send.data(), out, count, dt, symmarSum, algo, comm, nullptr) != symmarSuccess) {
        fprintf(stderr, "rank %d call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < world; ++r) want += inputAt(r, i, call);
        if (testref::loadElement(out, dt, i) != want) {
          fprintf(stderr, "rank %d call %d (%zu x dtype %d): element %zu is %g, not %g\n", rank, call, count, dt, i,
                  testref::loadElement(out, dt, i), want);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

// Every rank runs rounds x 4 fused calls of 1024 float32 a row (2, 4, 8 and 19 rows: staged and
// published rows in the ring), one-shot and two-shot by turns, no residual, gamma 1: residual_out
// must be the double sum exactly, norm_out that sum over its RMS to float rounding; returns the
// wrong calls.
int fusedCalls(symmarComm_t comm, int rank, int world, int rounds) {
  return fusedCalls(comm, rank, world, rounds, {2, 4, 8, 19});
}

int fusedCalls(symmarComm_t comm, int rank, int world, int rounds, const std::vector<size_t>& row_counts) {
  constexpr size_t kHidden = 1024;
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t tokens : row_counts) {
      const size_t n = tokens * kHidden;
      std::vector<float> in(n), res(n), norm(n), gamma(kHidden, 1.0f);
      std::vector<uint8_t> fp8(n);
      for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(inputAt(rank, i, call));
      symmarAddRmsNormArgs_t a{};
      a.input = in.data();
      a.residual_out = res.data();
      a.norm_out = norm.data();
      a.gamma = gamma.data();
      a.eps = 1e-6f;
      a.tokens = tokens;
      a.hidden = kHidden;
      a.dtype = symmarFloat32;
      const symmarAlgo_t algo = call % 2 ? symmarAlgoTwoShot : symmarAlgoOneShot;
      // Every other call of each form also quantizes: what the two-shot publishes then holds three parts.
      const bool quantized = call % 4 >= 2;
      constexpr float kScale = 0.01f;
      if (quantized) {
        a.fp8_out = fp8.data();
        a.fp8_scale = kScale;
      }
      if (symmarAllReduceAddRmsNormAlgo(&a, algo, comm, nullptr) != symmarSuccess) {
        fprintf(stderr, "rank %d fused call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      for (size_t t = 0; t < tokens; ++t) {
        double squares = 0;
        std::vector<double> sum(kHidden);
        for (size_t i = 0; i < kHidden; ++i) {
          for (int r = 0; r < world; ++r) sum[i] += inputAt(r, t * kHidden + i, call);
          squares += sum[i] * sum[i];
        }
        const double inv = 1.0 / std::sqrt(squares / kHidden + 1e-6);
        bool bad = false;
        for (size_t i = 0; i < kHidden && !bad; ++i) {
          const double want = sum[i] * inv;
          bad = res[t * kHidden + i] != sum[i] || std::fabs(norm[t * kHidden + i] - want) > 1e-5 * std::fabs(want) + 1e-6;
          // The quantized value of the float32 norm as returned (the same float division as the call's).
          bad = bad || (quantized && fp8[t * kHidden + i] != e4m3_reference::quantize(norm[t * kHidden + i] / kScale));
        }
        if (bad) {
          fprintf(stderr, "rank %d fused call %d (%zu rows): row %zu is wrong\n", rank, call, tokens, t);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

// As allReduceCalls, for one-shot reduce-scatters and all-gathers by turns (in place every third call):
// every output element against the sum in double (reduce-scatter) or the input it copies.
int scatterGatherCalls(symmarComm_t comm, int rank, int world, int rounds) {
  int wrong = 0, call = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t count : kBlocks) {
      const symmarDataType_t dt = call % 4 < 2 ? symmarBfloat16 : symmarFloat32;
      const size_t elem = dt == symmarFloat32 ? 4 : 2;
      const bool reduce = call % 2 == 0, in_place = call % 3 == 0;
      const size_t whole = count * static_cast<size_t>(world);
      std::vector<float> big(whole), small(count);  // room for either dtype
      char* const own_block = reinterpret_cast<char*>(big.data()) + static_cast<size_t>(rank) * count * elem;
      symmarResult_t res;
      const void* out;
      if (reduce) {
        for (size_t i = 0; i < whole; ++i) testref::storeElement(big.data(), dt, i, inputAt(rank, i, call));
        out = in_place ? static_cast<void*>(own_block) : small.data();
        res = symmarReduceScatterAlgo(big.data(), const_cast<void*>(out), count, dt, symmarSum, symmarAlgoOneShot, comm,
                                      nullptr);
      } else {
        void* send = in_place ? static_cast<void*>(own_block) : small.data();
        for (size_t i = 0; i < count; ++i) testref::storeElement(send, dt, i, inputAt(rank, i, call));
        out = big.data();
        res = symmarAllGatherAlgo(send, big.data(), count, dt, symmarAlgoOneShot, comm, nullptr);
      }
      if (res != symmarSuccess) {
        fprintf(stderr, "rank %d call %d failed: %s\n", rank, call, symmarGetLastError(comm));
        return wrong + 1;
      }
      const size_t n = reduce ? count : whole;
      for (size_t i = 0; i < n; ++i) {
        double want = 0;  // reduce-scatter: element rank * count + i summed; all-gather: rank i / count's input
        if (reduce) {
          for (int r = 0; r < world; ++r) want += inputAt(r, static_cast<size_t>(rank) * count + i, call);
        } else {
          want = inputAt(static_cast<int>(i / count), i % count, call);
        }
        if (testref::loadElement(out, dt, i) != want) {
          fprintf(stderr, "rank %d call %d (%s, %zu x dtype %d): element %zu is %g, not %g\n", rank, call,
                  reduce ? "reduce-scatter" : "all-gather", count, dt, i, testref::loadElement(out, dt, i), want);
          ++wrong;
          break;
        }
      }
      ++call;
    }
  }
  return wrong;
}

std::vector<int> onThreadRanks(int world, const std::function<int(symmarComm_t, int)>& body) {
  std::vector<symmarComm_t> comms(static_cast<size_t>(world));
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  if (symmarCommInitAll(comms.data(), world, nullptr, &cfg) != symmarSuccess) {
    fprintf(stderr, "comm of %d ranks: %s\n", world, symmarGetLastError(nullptr));
    return std::vector<int>(static_cast<size_t>(world), -1);
  }
  std::vector<int> results(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] { results[static_cast<size_t>(r)] = body(comms[static_cast<size_t>(r)], r); });
  }
  for (std::thread& t : ranks) t.join();
  for (symmarComm_t comm : comms) symmarCommDestroy(comm);
  return results;
}

std::vector<int> onForkedRanks(int world, const std::function<void(int)>& before_init,
                               const std::function<int(symmarComm_t, int)>& body) {
  symmarUniqueId id;
  if (symmarGetUniqueId(&id) != symmarSuccess) return std::vector<int>(static_cast<size_t>(world), -1);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (before_init) before_init(rank);
      symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
      cfg.device = SYMMAR_DEVICE_CPU;
      cfg.timeout_ms = 5000;
      symmarComm_t comm = nullptr;
      if (symmarCommInitRank(&comm, world, id, rank, &cfg) != symmarSuccess) _exit(10);
      const int res = body(comm, rank);
      symmarCommDestroy(comm);
      _exit(res);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    int st = 0;
    waitpid(pids[static_cast<size_t>(rank)], &st, 0);
    status[static_cast<size_t>(rank)] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + st;
  }
  return status;
}

}  // namespace hostcalls

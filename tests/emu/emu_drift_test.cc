// Ranks that drift apart: each emulated rank runs its own queue of calls back to back on a lane of
// its own (as a stream does), with random pauses of its own between calls and no join between
// calls, so a rank may be a call or more ahead of another. Mixed lamport, one-shot, two-shot,
// multimem and fused calls (every form, inputs private or in the symmetric heap) with grids that
// change from call to call; every rank refills its
// buffers as soon as its kernel has ended (what a stream may do), every output is checked against
// a float64 reference and bitwise across ranks. This is what exercises the done flags, lamport's
// three-buffer rotation against barrier kernels, and staging reused across calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

enum class Kind { kLamport, kOneShot, kTwoShot, kMultimem, kFusedOneShot, kFusedTwoShot, kFusedLamport };
constexpr int kKinds = 7;

/// One call of the sequence every rank makes (the same on every rank).
struct DriftCall {
  Kind kind;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;          ///< elements (fused: tokens x hidden)
  size_t hidden;         ///< fused only
  bool symmetric;        ///< the input lives in the symmetric heap (peers may read it in place)
  bool in_place;         ///< recv == send (fused: residual_out == input)
  bool fp8;              ///< fused only
};

constexpr size_t kBufBytes = 64 << 10;

std::vector<DriftCall> makeSequence(uint32_t seed, int calls) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const size_t counts[] = {1, 7, 64, 300, 1000, 2500, 4099};  // 1 to 4 blocks, chunked at the top
  const size_t hiddens[] = {7, 33, 128, 1000};
  std::vector<DriftCall> seq;
  for (int k = 0; k < calls; ++k) {
    DriftCall c{};
    c.kind = static_cast<Kind>(pick(kKinds));
    c.dtype = static_cast<symmarDataType_t>(pick(3));
    c.op = static_cast<symmarRedOp_t>(pick(symmarNumOps));
    c.count = counts[pick(7)];
    c.symmetric = pick(2) == 0;
    c.in_place = pick(3) == 0;
    if (c.kind == Kind::kMultimem && c.dtype == symmarFloat32 && c.op != symmarSum) c.op = symmarSum;
    if (c.kind == Kind::kFusedOneShot || c.kind == Kind::kFusedTwoShot || c.kind == Kind::kFusedLamport) {
      c.op = symmarSum;
      // Lamport takes rows of whole vectors only (128 and 1000 elements are, in every dtype).
      c.hidden = c.kind == Kind::kFusedLamport ? hiddens[2 + pick(2)] : hiddens[pick(4)];
      c.count = c.hidden * static_cast<size_t>(1 + pick(4));
      c.fp8 = pick(2) == 0;
    }
    seq.push_back(c);
  }
  return seq;
}

symmarAlgo_t algoOf(Kind k) {
  switch (k) {
    case Kind::kLamport:
      return symmarAlgoLamport;
    case Kind::kOneShot:
      return symmarAlgoOneShot;
    case Kind::kTwoShot:
      return symmarAlgoTwoShot;
    default:
      return symmarAlgoMultimem;
  }
}

/// Small multiples of 1/8 (exact in every dtype), varied by rank, index and call.
double fusedInput(int rank, size_t i, int call) {
  return static_cast<double>(static_cast<int>((rank * 31 + i * 7 + static_cast<size_t>(call) * 5) % 23) - 11) / 8.0;
}
double fusedResidual(size_t i, int call) {
  return static_cast<double>(static_cast<int>((i * 3 + static_cast<size_t>(call)) % 19) - 9) / 4.0;
}

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/// One rank's buffers: private ones and its share of the symmetric ones.
struct RankBuffers {
  std::vector<char> send, recv, residual, norm, gamma;
  std::vector<unsigned char> fp8;
  char* sym = nullptr;
};

/// Calls each rank has finished, so that a rank can see how far ahead of the slowest it is.
struct Progress {
  explicit Progress(int world) : done(static_cast<size_t>(world)) {}
  std::vector<std::atomic<int>> done;
  std::atomic<int> ahead{0};  ///< calls started while some rank had not finished the one before
};

class DriftRank {
 public:
  DriftRank(EmuComm& comm, int rank, const std::vector<DriftCall>& seq, char* sym, uint32_t seed, Progress* progress)
      : comm_(comm), rank_(rank), seq_(seq), rng_(seed * 7919u + static_cast<uint32_t>(rank)), progress_(progress) {
    b_.send.resize(kBufBytes);
    b_.recv.resize(kBufBytes);
    b_.residual.resize(kBufBytes);
    b_.norm.resize(kBufBytes);
    b_.gamma.resize(kBufBytes);
    b_.fp8.resize(kBufBytes);
    b_.sym = sym;
    hashes_.resize(seq.size());
  }

  /// Makes this rank sleep late_ms before call k.
  void beLateAt(int k, int late_ms) {
    late_at_ = k;
    late_ms_ = late_ms;
  }
  /// Failed calls become outcomes (firstFailed) rather than errors: for runs in which a rank is late.
  void expectFailures() { expect_failures_ = true; }

  /// Runs the whole sequence; error() says what went wrong first ("" if nothing).
  void run() {
    for (size_t k = 0; k < seq_.size() && error_.empty(); ++k) {
      pause();
      if (static_cast<int>(k) == late_at_) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms_));
      const DriftCall& c = seq_[k];
      const int n = static_cast<int>(k);
      for (const std::atomic<int>& d : progress_->done) {
        if (d.load() < n) {
          progress_->ahead.fetch_add(1);
          break;
        }
      }
      if (c.kind == Kind::kFusedOneShot || c.kind == Kind::kFusedTwoShot || c.kind == Kind::kFusedLamport) {
        fused(c, n);
      } else {
        allReduce(c, n);
      }
      if (error_.empty() && failed() && first_failed_ < 0) first_failed_ = n;
      if (error_.empty() && failed() && !expect_failures_) {
        error_ = "call " + std::to_string(k) + ": rank " + std::to_string(rank_) + " reported failure " +
                 std::to_string(comm_.status(rank_)[gpu::kStatusCode]) + " (reason " +
                 std::to_string(comm_.status(rank_)[gpu::kStatusReason]) + ")";
      }
      progress_->done[static_cast<size_t>(rank_)].store(n + 1);
    }
  }

  const std::string& error() const { return error_; }
  uint64_t hash(size_t k) const { return hashes_[k]; }
  /// The first call after which this rank's comm reported a failure (-1: none).
  int firstFailed() const { return first_failed_; }

 private:
  /// The comm reported a failure (sticky: every later call fails too, and its outputs are not checked).
  bool failed() const { return comm_.status(rank_)[gpu::kStatusCode] != 0; }
  /// Random pauses: most calls follow at once, some after a few yields, a few after up to 0.5 ms.
  void pause() {
    const uint32_t x = rng_() % 100;
    if (x < 60) return;
    if (x < 90) {
      for (uint32_t i = rng_() % 50; i > 0; --i) std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 500));
  }

  void allReduce(const DriftCall& c, int n) {
    const size_t elem = symmarTypeSize(c.dtype);
    char* send = c.symmetric ? b_.sym : b_.send.data();
    char* recv = c.in_place ? send : b_.recv.data();
    fillInput(c.dtype, send, c.count, rank_, n);
    EmuCall call{algoOf(c.kind), c.dtype, c.op, c.count, {}, {}};
    call.send.assign(static_cast<size_t>(comm_.world()), nullptr);
    call.recv.assign(static_cast<size_t>(comm_.world()), nullptr);
    call.send[static_cast<size_t>(rank_)] = send;
    call.recv[static_cast<size_t>(rank_)] = recv;
    comm_.launchOn(rank_, comm_.launchOf(rank_, call));
    if (failed()) return;
    for (size_t i = 0; i < c.count; ++i) {
      double want = inputValue(0, i, n);
      for (int p = 1; p < comm_.world(); ++p) {
        const double x = inputValue(p, i, n);
        want = c.op == symmarSum ? want + x : c.op == symmarMax ? std::fmax(want, x) : std::fmin(want, x);
      }
      const double got = loadAs(c.dtype, recv, i);
      if (got != want) {
        error_ = "call " + std::to_string(n) + " (" + symmarAlgoName(call.algo) + ", count " + std::to_string(c.count) +
                 "): rank " + std::to_string(rank_) + " element " + std::to_string(i) + " is " + std::to_string(got) +
                 ", the float64 reference " + std::to_string(want);
        return;
      }
    }
    hashes_[static_cast<size_t>(n)] = fnv(recv, c.count * elem);
  }

  void fused(const DriftCall& c, int n) {
    const size_t h = c.hidden, tokens = c.count / h;
    // A symmetric input is read in place by the staged forms where the outputs allow it.
    char* input = c.symmetric ? b_.sym : b_.send.data();
    for (size_t i = 0; i < c.count; ++i) {
      storeAs(c.dtype, input, i, fusedInput(rank_, i, n));
      storeAs(c.dtype, b_.residual.data(), i, fusedResidual(i, n));
    }
    for (size_t i = 0; i < h; ++i) storeAs(c.dtype, b_.gamma.data(), i, 0.5 + static_cast<double>(i % 7) / 8.0);
    void* res_out = c.in_place ? input : b_.recv.data();
    AddRmsNormCall call{input, b_.residual.data(), res_out, b_.norm.data(), b_.gamma.data(),
                        c.fp8 ? b_.fp8.data() : nullptr, 0.05f, 1e-6f, tokens, h, c.dtype};
    const symmarAlgo_t form = c.kind == Kind::kFusedTwoShot ? symmarAlgoTwoShot
                              : c.kind == Kind::kFusedLamport ? symmarAlgoLamport
                                                              : symmarAlgoOneShot;
    const Launch l = comm_.addRmsNormLaunchOf(rank_, call, form);
    if (l.blocks == 0) {
      error_ = "call " + std::to_string(n) + ": the call does not fit its fused form";
      return;
    }
    comm_.launchOn(rank_, l);
    if (failed()) return;
    const double tol = c.dtype == symmarFloat32 ? 1e-5 : c.dtype == symmarFloat16 ? 2e-3 : 1.6e-2;
    for (size_t t = 0; t < tokens; ++t) {
      double ss = 0;
      for (size_t i = 0; i < h; ++i) {
        const size_t e = t * h + i;
        double want = fusedResidual(e, n);
        for (int p = 0; p < comm_.world(); ++p) want += fusedInput(p, e, n);
        const double got = loadAs(c.dtype, res_out, e);
        if (std::fabs(got - want) > tol * std::fabs(want) + 1e-6) {
          error_ = "call " + std::to_string(n) + " (fused): rank " + std::to_string(rank_) + " residual " +
                   std::to_string(e) + " is " + std::to_string(got) + ", want " + std::to_string(want);
          return;
        }
        ss += got * got;
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(h) + 1e-6);
      for (size_t i = 0; i < h; ++i) {
        const size_t e = t * h + i;
        const double want = loadAs(c.dtype, res_out, e) * inv * loadAs(c.dtype, b_.gamma.data(), i);
        const double got = loadAs(c.dtype, b_.norm.data(), e);
        if (std::fabs(got - want) > tol * std::fabs(want) + 1e-5) {
          error_ = "call " + std::to_string(n) + " (fused): rank " + std::to_string(rank_) + " norm " +
                   std::to_string(e) + " is " + std::to_string(got) + ", want " + std::to_string(want);
          return;
        }
      }
    }
    const size_t bytes = c.count * symmarTypeSize(c.dtype);
    uint64_t hsh = fnv(res_out, bytes);
    hsh = fnv(b_.norm.data(), bytes, hsh);
    if (c.fp8) hsh = fnv(b_.fp8.data(), c.count, hsh);
    hashes_[static_cast<size_t>(n)] = hsh;
  }

  EmuComm& comm_;
  int rank_;
  const std::vector<DriftCall>& seq_;
  std::mt19937 rng_;
  RankBuffers b_;
  std::vector<uint64_t> hashes_;
  std::string error_;
  Progress* progress_;
  int late_at_ = -1, late_ms_ = 0, first_failed_ = -1;
  bool expect_failures_ = false;
};

void runDrift(int world, uint32_t seed, int calls) {
  EmuOptions o;
  o.world = world;
  o.blocks = 3;
  o.bytes_per_block = 1024;
  o.staging_bytes = 32 << 10;  // a two-shot fused row of 1000 f32 with FP8 fits a half
  EmuComm comm(o);
  const std::vector<DriftCall> seq = makeSequence(seed, calls);
  const std::vector<char*> sym = comm.symmetricAlloc(kBufBytes);
  Progress progress(world);
  std::vector<std::unique_ptr<DriftRank>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<DriftRank>(comm, r, seq, sym[static_cast<size_t>(r)], seed, &progress));
  }
  std::vector<std::thread> threads;
  for (auto& r : ranks) threads.emplace_back([&r] { r->run(); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_EQ(ranks[static_cast<size_t>(r)]->error(), "") << "seed " << seed;
  // The point of the suite: ranks really were in different calls, and often.
  EXPECT_GE(progress.ahead.load(), calls / 10) << "ranks hardly drifted apart";
  for (size_t k = 0; k < seq.size(); ++k) {
    for (int r = 1; r < world; ++r) {
      ASSERT_EQ(ranks[static_cast<size_t>(r)]->hash(k), ranks[0]->hash(k))
          << "call " << k << ": rank " << r << "'s output differs from rank 0's (seed " << seed << ")";
    }
  }
}

// One rank sleeps far past the timeout before one call of the drifting sequence. Every call before
// it succeeds with the reference values on every rank; from that call on every call of every rank
// fails (the late rank's included: it must not complete a call its peers gave up on), each within
// the timeout; nothing hangs.
TEST(Drift, ALateRankFailsTheCallOnEveryRankAndNothingAfter) {
  for (uint32_t seed : {11u, 12u, 13u}) {
    std::mt19937 rng(seed);
    const int world = 2 + static_cast<int>(rng() % 3), calls = 40;
    const int late_rank = static_cast<int>(rng() % static_cast<uint32_t>(world));
    const int late_at = 10 + static_cast<int>(rng() % 20);
    EmuOptions o;
    o.world = world;
    o.blocks = 3;
    o.staging_bytes = 32 << 10;
    o.timeout_ms = 1500;
    EmuComm comm(o);
    const std::vector<DriftCall> seq = makeSequence(seed, calls);
    const std::vector<char*> sym = comm.symmetricAlloc(kBufBytes);
    Progress progress(world);
    std::vector<std::unique_ptr<DriftRank>> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.push_back(std::make_unique<DriftRank>(comm, r, seq, sym[static_cast<size_t>(r)], seed, &progress));
      ranks.back()->expectFailures();
    }
    ranks[static_cast<size_t>(late_rank)]->beLateAt(late_at, 4 * o.timeout_ms);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (auto& r : ranks) threads.emplace_back([&r] { r->run(); });
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 60.0) << "seed " << seed << ": every failure is bounded by the timeout";
    for (int r = 0; r < world; ++r) {
      const DriftRank& d = *ranks[static_cast<size_t>(r)];
      ASSERT_EQ(d.error(), "") << "seed " << seed;
      EXPECT_EQ(d.firstFailed(), late_at) << "seed " << seed << ": rank " << r << " (rank " << late_rank
                                          << " late at call " << late_at << ", world " << world << ")";
    }
    for (int k = 0; k < late_at; ++k) {
      for (int r = 1; r < world; ++r) {
        ASSERT_EQ(ranks[static_cast<size_t>(r)]->hash(static_cast<size_t>(k)), ranks[0]->hash(static_cast<size_t>(k)))
            << "seed " << seed << " call " << k;
      }
    }
  }
}

TEST(Drift, TwoRanksMixedCallsAtTheirOwnPace) { runDrift(2, 1, longRunCalls()); }
TEST(Drift, ThreeRanksMixedCallsAtTheirOwnPace) { runDrift(3, 2, longRunCalls()); }
TEST(Drift, FourRanksMixedCallsAtTheirOwnPace) { runDrift(4, 3, longRunCalls() / 2); }

}  // namespace
}  // namespace emu
}  // namespace symmar

// The reduce-scatter and all-gather kernels (cuda/scatter_gather.cu, scatter_gather_multimem.cu)
// on the emulated CUDA runtime: every dtype and op, counts around the vector and chunk boundaries,
// worlds 2..8, staged and symmetric inputs, in place, the host-memory path, multimem, against the float64 reference (a block reduced over the ranks in
// rank order, every rank's block at its place); then ranks that drift apart with these calls mixed
// among allreduces, each rank on its own lane.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

enum class Mode { kStaged, kInPlace, kSymmetric, kSymmetricInPlace };

struct Case {
  Collective coll;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;  ///< one rank's block
  int world;
  Mode mode;
  bool host_staged = false;  ///< every allocation in host memory, no user heap (pcie-nop2p)
  symmarAlgo_t algo = symmarAlgoOneShot;
};

const char* nameOf(Collective c) { return c == Collective::kReduceScatter ? "reducescatter" : "allgather"; }

void PrintTo(const Case& c, std::ostream* os) { *os << nameOf(c.coll) << " count " << c.count; }

std::string caseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  static const char* dt[] = {"f32", "f16", "bf16", "i32", "f64"};
  static const char* op[] = {"sum", "max", "min"};
  static const char* mode[] = {"staged", "inplace", "symmetric", "symmetric_inplace"};
  return std::string(nameOf(c.coll)) + "_" + dt[c.dtype] + "_" + op[c.op] + "_n" + std::to_string(c.count) +
         "_w" + std::to_string(c.world) + "_" + mode[static_cast<int>(c.mode)] + (c.host_staged ? "_hoststaged" : "") +
         (c.algo == symmarAlgoMultimem ? "_multimem" : "");
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // World 2: every dtype (and op of a reduce-scatter) at a small count and one of several chunks
  // (2100 x 2 ranks x 4 B against the 4 KiB halves of an 8 KiB staging), staged and symmetric in place.
  for (size_t count : {size_t(7), size_t(2100)}) {
    for (int m = 0; m < 4; ++m) {
      const Mode mode = static_cast<Mode>(m);
      for (int dt = 0; dt < symmarNumTypes; ++dt) {
        out.push_back({Collective::kAllGather, static_cast<symmarDataType_t>(dt), symmarSum, count, 2, mode});
        if (dt >= 3 || mode == Mode::kInPlace || mode == Mode::kSymmetric) continue;  // kernel dtypes only
        for (int op = 0; op < symmarNumOps; ++op) {
          out.push_back({Collective::kReduceScatter, static_cast<symmarDataType_t>(dt), static_cast<symmarRedOp_t>(op),
                         count, 2, mode});
        }
      }
    }
  }
  // Worlds 3 and 8: counts around vectors, blocks and chunks in every mode, the dtype rotating.
  for (int world : {3, 8}) {
    for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(2100)}) {
      for (int m = 0; m < 4; ++m) {
        const int k = m + static_cast<int>(count);
        out.push_back({Collective::kReduceScatter, static_cast<symmarDataType_t>(k % 3), symmarSum, count, world,
                       static_cast<Mode>(m)});
        out.push_back({Collective::kAllGather, static_cast<symmarDataType_t>(k % symmarNumTypes), symmarSum, count,
                       world, static_cast<Mode>(m)});
      }
    }
  }
  // The host-memory path of GPUs without peer access: inputs always staged, in place or not.
  for (int world : {2, 3}) {
    for (size_t count : {size_t(7), size_t(2100)}) {
      for (Mode mode : {Mode::kStaged, Mode::kInPlace}) {
        out.push_back({Collective::kReduceScatter, symmarBfloat16, symmarSum, count, world, mode, true});
        out.push_back({Collective::kAllGather, symmarFloat64, symmarSum, count, world, mode, true});
      }
    }
  }
  // Through the switch (multimem.ld_reduce, multimem.st): the reductions PTX has (no f32 max/min),
  // every dtype of an all-gather, counts around vectors and chunks; inputs in the heap are staged
  // all the same (the multicast view needs the same offset on every rank).
  for (int world : {2, 4, 8}) {
    for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(2100)}) {
      for (Mode mode : {Mode::kStaged, Mode::kInPlace, Mode::kSymmetric}) {
        const int k = world + static_cast<int>(count) + static_cast<int>(mode);
        const symmarDataType_t dt = static_cast<symmarDataType_t>(k % 3);
        const symmarRedOp_t op = dt == symmarFloat32 ? symmarSum : static_cast<symmarRedOp_t>(k % symmarNumOps);
        out.push_back({Collective::kReduceScatter, dt, op, count, world, mode, false, symmarAlgoMultimem});
        out.push_back({Collective::kAllGather, static_cast<symmarDataType_t>(k % symmarNumTypes), symmarSum, count,
                       world, mode, false, symmarAlgoMultimem});
      }
    }
  }
  return out;
}

/// Runs c on a fresh comm: every rank's buffers filled for call `call`, the outputs checked.
std::string runCase(const Case& c, int call) {
  EmuOptions o;
  o.world = c.world;
  o.blocks = 3;
  o.host_staged = c.host_staged;
  EmuComm comm(o);
  const bool scatter = c.coll == Collective::kReduceScatter;
  const size_t elem = symmarTypeSize(c.dtype), n = c.count, whole = n * static_cast<size_t>(c.world);
  const bool symmetric = c.mode == Mode::kSymmetric || c.mode == Mode::kSymmetricInPlace;
  const bool in_place = c.mode == Mode::kInPlace || c.mode == Mode::kSymmetricInPlace;
  // Per rank: the whole buffer (nranks blocks) and the block, which in place is the rank's block of it.
  std::vector<std::vector<char>> wholes(static_cast<size_t>(c.world), std::vector<char>(whole * elem)),
      blocks(static_cast<size_t>(c.world), std::vector<char>(n * elem));
  const std::vector<char*> heap = symmetric ? comm.symmetricAlloc((whole + n) * elem) : std::vector<char*>();
  EmuCall ec{c.algo, c.dtype, c.op, n, {}, {}, c.coll};
  std::vector<char*> whole_of, block_of;
  for (int r = 0; r < c.world; ++r) {
    char* w = symmetric ? heap[static_cast<size_t>(r)] : wholes[static_cast<size_t>(r)].data();
    char* b = in_place ? w + static_cast<size_t>(r) * n * elem
                       : symmetric ? w + whole * elem : blocks[static_cast<size_t>(r)].data();
    if (scatter) {
      fillInput(c.dtype, w, whole, r, call);
    } else {
      std::memset(w, 0x7f, whole * elem);  // garbage where the blocks land
      fillInput(c.dtype, b, n, r, call);
    }
    whole_of.push_back(w);
    block_of.push_back(b);
    ec.send.push_back(scatter ? w : b);
    ec.recv.push_back(scatter ? b : w);
  }
  if (!comm.run(ec)) return "no kernel serves the call";
  for (int r = 0; r < c.world; ++r) {
    if (comm.status(r)[gpu::kStatusCode] != 0) return "rank " + std::to_string(r) + " reported a failure";
    for (size_t i = 0; i < (scatter ? n : whole); ++i) {
      double want;
      if (scatter) {
        want = inputValue(0, static_cast<size_t>(r) * n + i, call);
        for (int p = 1; p < c.world; ++p) want = testref::combine(c.op, want, inputValue(p, r * n + i, call));
      } else {
        want = testref::roundTo(c.dtype, inputValue(static_cast<int>(i / n), i % n, call));
      }
      const double got = loadAs(c.dtype, scatter ? block_of[static_cast<size_t>(r)] : whole_of[static_cast<size_t>(r)], i);
      if (got != want) {
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " is " + std::to_string(got) +
               ", the float64 reference " + std::to_string(want);
      }
    }
  }
  return "";
}

class ScatterGatherKernels : public testing::TestWithParam<Case> {};

TEST_P(ScatterGatherKernels, MatchTheFloat64Reference) { EXPECT_EQ(runCase(GetParam(), 3), ""); }

INSTANTIATE_TEST_SUITE_P(Emulated, ScatterGatherKernels, testing::ValuesIn(cases()), caseName);

TEST(ScatterGatherKernels, CoverEnoughCases) { EXPECT_GE(cases().size(), 100u); }

// Ranks drift apart: each rank runs its own sequence of reduce-scatters, all-gathers and
// allreduces (one-shot or multimem, and two-shot allreduces) back to back on its own lane, with random pauses and no join between calls, and
// refills its buffers as soon as its kernel has ended. Every output is checked.
TEST(ScatterGatherKernels, DriftingRanksMixedWithAllReduces) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    EmuOptions o;
    o.world = 2 + static_cast<int>(rng() % 3);
    o.blocks = 3;
    o.staging_bytes = 16 << 10;
    EmuComm comm(o);
    const int world = o.world, calls = std::max(30, longRunCalls() / 20);
    struct Planned {
      int kind;  // 0 reduce-scatter, 1 all-gather, 2 one-shot allreduce, 3 two-shot allreduce
      symmarDataType_t dtype;
      size_t count;
      bool symmetric;
      bool through_switch;  // multimem instead of one-shot (kinds 0-2)
    };
    std::vector<Planned> seq;
    const size_t counts[] = {1, 9, 300, 1500};
    for (int k = 0; k < calls; ++k) {
      seq.push_back({static_cast<int>(rng() % 4), static_cast<symmarDataType_t>(rng() % 3), counts[rng() % 4],
                     rng() % 2 == 0, rng() % 2 == 0});
    }
    const size_t max_elems = 1500 * 8;
    const std::vector<char*> heap = comm.symmetricAlloc(max_elems * 4 * 2);
    std::vector<std::string> errors(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::mt19937 pause(seed * 31 + static_cast<uint32_t>(r));
        std::vector<char> own_send(max_elems * 4), own_recv(max_elems * 4);
        for (int k = 0; k < calls && errors[static_cast<size_t>(r)].empty(); ++k) {
          if (pause() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(pause() % 300));
          const Planned& p = seq[static_cast<size_t>(k)];
          const size_t n = p.count, whole = n * static_cast<size_t>(world);
          char* send = p.symmetric ? heap[static_cast<size_t>(r)] : own_send.data();
          char* recv = p.symmetric ? heap[static_cast<size_t>(r)] + max_elems * 4 : own_recv.data();
          const Collective coll = p.kind == 0 ? Collective::kReduceScatter
                                  : p.kind == 1 ? Collective::kAllGather
                                                : Collective::kAllReduce;
          const size_t in = p.kind == 0 ? whole : n, out = p.kind == 1 ? whole : n;
          fillInput(p.dtype, send, in, r, k);
          const symmarAlgo_t algo = p.kind == 3         ? symmarAlgoTwoShot
                                    : p.through_switch ? symmarAlgoMultimem
                                                       : symmarAlgoOneShot;
          EmuCall ec{algo, p.dtype, symmarSum, n, {}, {}, coll};
          ec.send.assign(static_cast<size_t>(world), nullptr);
          ec.recv.assign(static_cast<size_t>(world), nullptr);
          ec.send[static_cast<size_t>(r)] = send;
          ec.recv[static_cast<size_t>(r)] = recv;
          comm.launchOn(r, comm.launchOf(r, ec));
          if (comm.status(r)[gpu::kStatusCode] != 0) {
            errors[static_cast<size_t>(r)] = "call " + std::to_string(k) + " reported a failure";
            break;
          }
          for (size_t i = 0; i < out; ++i) {
            double want = 0;
            if (p.kind == 1) {
              want = inputValue(static_cast<int>(i / n), i % n, k);
            } else {
              const size_t at = p.kind == 0 ? static_cast<size_t>(r) * n + i : i;
              for (int q = 0; q < world; ++q) want += inputValue(q, at, k);
            }
            if (loadAs(p.dtype, recv, i) != want) {
              errors[static_cast<size_t>(r)] = "call " + std::to_string(k) + " (kind " + std::to_string(p.kind) +
                                               (p.through_switch ? ", multimem" : "") +
                                               ", count " + std::to_string(n) + ") element " + std::to_string(i) +
                                               " is " + std::to_string(loadAs(p.dtype, recv, i)) + ", want " +
                                               std::to_string(want);
              break;
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "seed " << seed << " rank " << r;
  }
}

}  // namespace
}  // namespace emu
}  // namespace symmar

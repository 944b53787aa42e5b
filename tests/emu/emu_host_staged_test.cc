// The host-memory path of GPUs without peer access (link pcie-nop2p): the same one-shot and two-shot
// kernels with every rank's staging and signal pad in shared memfd mappings and no user heap, as
// HostStagedHeap builds them. Every dtype and op, counts up to several chunks, worlds 2..8, buffers
// out of place, in place and misaligned, and 1,000 calls on persistent state.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

struct StagedCase {
  symmarAlgo_t algo;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  int world;
  int mode;  // 0 out of place, 1 in place, 2 misaligned by one element
};

void PrintTo(const StagedCase& c, std::ostream* os) { *os << symmarAlgoName(c.algo) << " count " << c.count; }

std::string stagedName(const testing::TestParamInfo<StagedCase>& info) {
  const StagedCase& c = info.param;
  static const char* dt[] = {"f32", "f16", "bf16"};
  static const char* op[] = {"sum", "max", "min"};
  static const char* mode[] = {"out", "inplace", "misaligned"};
  return std::string(symmarAlgoName(c.algo)) + "_" + dt[c.dtype] + "_" + op[c.op] + "_n" + std::to_string(c.count) +
         "_w" + std::to_string(c.world) + "_" + mode[c.mode];
}

EmuOptions stagedOptions(int world) {
  EmuOptions o;
  o.world = world;
  o.host_staged = true;
  o.multicast = false;
  return o;
}

class HostStaged : public testing::TestWithParam<StagedCase> {};

TEST_P(HostStaged, MatchFloat64ReferenceOnEveryRank) {
  const StagedCase c = GetParam();
  EmuComm comm(stagedOptions(c.world));
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t offset = c.mode == 2 ? elem : 0;
  std::vector<std::vector<char>> send(static_cast<size_t>(c.world), std::vector<char>(c.count * elem + 32));
  std::vector<std::vector<char>> recv = send;
  EmuCall call{c.algo, c.dtype, c.op, c.count, {}, {}};
  for (int r = 0; r < c.world; ++r) {
    char* s = send[static_cast<size_t>(r)].data() + offset;
    fillInput(c.dtype, s, c.count, r, 0);
    call.send.push_back(s);
    call.recv.push_back(c.mode == 1 ? s : recv[static_cast<size_t>(r)].data() + offset);
  }
  ASSERT_TRUE(comm.run(call));
  for (int r = 0; r < c.world; ++r) ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
  EXPECT_EQ(checkOutputs(c.dtype, c.op, c.count, c.world, 0, call.recv), "");
}

std::vector<StagedCase> stagedCases() {
  std::vector<StagedCase> cases;
  int k = 0;
  for (symmarAlgo_t algo : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      for (int op = 0; op < symmarNumOps; ++op) {
        for (int i = 0; i < 5; ++i, ++k) {
          const int world = 2 + k % 7;
          const size_t chunk = sched::chunkElems(EmuOptions().staging_bytes, symmarTypeSize(dt), world);
          const size_t counts[] = {1, 7, 1000, chunk + 1, 3 * chunk + 5};
          cases.push_back({algo, dt, static_cast<symmarRedOp_t>(op), counts[i], world, k % 3});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Emulated, HostStaged, testing::ValuesIn(stagedCases()), stagedName);

// What CUDA graph replays do, on the host-memory path: one DeviceState, changing shapes.
TEST(HostStagedProtocol, ManyCallsWithPersistentState) {
  EmuComm comm(stagedOptions(4));
  CallRunner run(comm);
  const size_t counts[] = {1, 513, 4000, 77, 9000, 16};
  const int calls = longRunCalls();
  for (int n = 0; n < calls; ++n) {
    const symmarAlgo_t algo = n % 3 == 1 ? symmarAlgoTwoShot : symmarAlgoOneShot;
    const symmarDataType_t dt = n % 5 == 0 ? symmarBfloat16 : symmarFloat32;
    ASSERT_EQ(run.call(algo, dt, symmarSum, counts[n % 6], false, n), "") << "call " << n;
  }
  EXPECT_EQ(comm.state(0).end_epoch, static_cast<uint32_t>(calls));
}

}  // namespace
}  // namespace emu
}  // namespace symmar

// The real kernels (cuda/oneshot.cu, twoshot.cu, multimem.cu) run on the emulated CUDA runtime:
// every algorithm x dtype x op, counts around the vector and chunk boundaries, worlds 2..8 and
// every buffer mode, against a float64 reference and bitwise equal on every rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

enum class Mode { kOutOfPlace, kInPlace, kSymmetricInput, kMisaligned };
constexpr int kModes = 4;
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xa5;

struct Case {
  symmarAlgo_t algo;
  symmarDataType_t dtype;
  symmarRedOp_t op;
  size_t count;
  int world;
  Mode mode;
};

void PrintTo(const Case& c, std::ostream* os) { *os << symmarAlgoName(c.algo) << " count " << c.count; }

std::string caseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  static const char* dt[] = {"f32", "f16", "bf16"};
  static const char* op[] = {"sum", "max", "min"};
  static const char* mode[] = {"out", "inplace", "symmetric", "misaligned"};
  return std::string(symmarAlgoName(c.algo)) + "_" + dt[c.dtype] + "_" + op[c.op] + "_n" + std::to_string(c.count) +
         "_w" + std::to_string(c.world) + "_" + mode[static_cast<int>(c.mode)];
}

/// A host buffer with guard bytes on both sides; elem_offset shifts the data off 16-byte alignment.
struct Guarded {
  Guarded(size_t bytes, size_t elem_offset) : bytes_(bytes), offset_(elem_offset) {
    raw_ = static_cast<char*>(std::aligned_alloc(64, (kGuardBytes * 2 + bytes + offset_ + 63) / 64 * 64));
    std::memset(raw_, kGuardByte, kGuardBytes * 2 + bytes + offset_);
  }
  ~Guarded() { std::free(raw_); }
  char* data() const { return raw_ + kGuardBytes + offset_; }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuardBytes + offset_; ++i) {
      if (static_cast<unsigned char>(raw_[i]) != kGuardByte) return false;
    }
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (static_cast<unsigned char>(data()[bytes_ + i]) != kGuardByte) return false;
    }
    return true;
  }

 private:
  char* raw_;
  size_t bytes_;
  size_t offset_;
};

class Kernels : public testing::TestWithParam<Case> {};

TEST_P(Kernels, MatchFloat64ReferenceOnEveryRank) {
  const Case c = GetParam();
  EmuOptions o;
  o.world = c.world;
  EmuComm comm(o);
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t bytes = c.count * elem;
  const size_t offset = c.mode == Mode::kMisaligned ? elem : 0;
  std::vector<std::unique_ptr<Guarded>> sends, recvs;
  std::vector<char*> sym =
      c.mode == Mode::kSymmetricInput ? comm.symmetricAlloc(bytes ? bytes : 1) : std::vector<char*>();
  EmuCall call{c.algo, c.dtype, c.op, c.count, {}, {}};
  for (int r = 0; r < c.world; ++r) {
    sends.push_back(std::make_unique<Guarded>(bytes, offset));
    recvs.push_back(std::make_unique<Guarded>(bytes, offset));
    char* send = c.mode == Mode::kSymmetricInput ? sym[static_cast<size_t>(r)] : sends.back()->data();
    fillInput(c.dtype, send, c.count, r, 0);
    call.send.push_back(send);
    call.recv.push_back(c.mode == Mode::kInPlace ? send : recvs.back()->data());
  }
  ASSERT_TRUE(comm.run(call)) << "no kernel for this case";
  for (int r = 0; r < c.world; ++r) {
    ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0)
        << "rank " << r << " reported a failure (peer " << comm.status(r)[gpu::kStatusPeer] << ")";
    EXPECT_TRUE(sends[static_cast<size_t>(r)]->guardsIntact()) << "rank " << r << " wrote outside its input";
    EXPECT_TRUE(recvs[static_cast<size_t>(r)]->guardsIntact()) << "rank " << r << " wrote outside its output";
  }
  const std::string wrong = checkOutputs(c.dtype, c.op, c.count, c.world, 0, call.recv);
  EXPECT_EQ(wrong, "");
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  const symmarAlgo_t algos[] = {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMultimem};
  const symmarDataType_t dtypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16};
  int k = 0;
  // Every kernel instance, every interesting count; worlds and buffer modes rotate.
  for (symmarAlgo_t algo : algos) {
    for (symmarDataType_t dt : dtypes) {
      for (int op = 0; op < symmarNumOps; ++op) {
        if (!gpu::kernelOf(algo, dt, static_cast<symmarRedOp_t>(op), true)) continue;
        const size_t vec = sched::vecElems(symmarTypeSize(dt));
        for (int i = 0; i < 9; ++i, ++k) {
          const int world = 2 + k % 7;
          const size_t chunk = sched::chunkElems(EmuOptions().staging_bytes, symmarTypeSize(dt), world);
          const size_t counts[] = {0, 1, 7, vec - 1, 1000, chunk - 1, chunk, chunk + 1, 3 * chunk + 5};
          cases.push_back({algo, dt, static_cast<symmarRedOp_t>(op), counts[i], world, static_cast<Mode>(k % kModes)});
        }
      }
    }
  }
  // Every world size with every buffer mode, for each algorithm, across a chunk boundary.
  for (symmarAlgo_t algo : algos) {
    for (symmarDataType_t dt : {symmarFloat32, symmarBfloat16}) {
      for (int world = 2; world <= 8; ++world) {
        const size_t chunk = sched::chunkElems(EmuOptions().staging_bytes, symmarTypeSize(dt), world);
        for (int m = 0; m < kModes; ++m) cases.push_back({algo, dt, symmarSum, chunk + 3, world, static_cast<Mode>(m)});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Emulated, Kernels, testing::ValuesIn(allCases()), caseName);

}  // namespace
}  // namespace emu
}  // namespace symmar

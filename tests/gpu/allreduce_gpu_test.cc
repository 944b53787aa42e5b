// Correctness sweep of the CUDA kernels: every algorithm x dtype x op x count x buffer mode against a
// float64 reference, bitwise identical on every rank. Ranks share one GPU (symmarCommInitAll with a
// repeated device) or, with several GPUs, use one each (the only way to reach multimem).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

constexpr size_t kStaging = size_t{64} << 10;  // small, so large counts run through many chunks
constexpr int kTimeoutMs = 20000;

enum Mode { kOutOfPlace, kInPlace, kSymmetricOut, kSymmetricIn, kUnaligned, kNumModes };
const char* modeName(int m) {
  static const char* names[] = {"out-of-place", "in-place", "symmetric out-of-place", "symmetric in-place",
                                "unaligned"};
  return names[m];
}

/// Every rank's send/recv buffers for one mode, sized for the largest count.
struct Buffers {
  std::vector<void*> send, recv;
  bool symmetric = false;
};

std::vector<size_t> testCounts(symmarDataType_t t) {
  return {0, 1, 2, 3, 7, 1000, 65537, (size_t{1} << 20) + 3, 5 * (kStaging / testref::elementSize(t)) + 3};
}
constexpr size_t kMaxBytes = ((size_t{1} << 20) + 64) * 4;

bool allocBuffers(const LocalWorld& w, bool symmetric, Buffers* b) {
  const int n = w.size();
  b->send.assign(static_cast<size_t>(n), nullptr);
  b->recv.assign(static_cast<size_t>(n), nullptr);
  b->symmetric = symmetric;
  std::vector<int> ok(static_cast<size_t>(n), 0);
  w.parallel([&](int r) {
    if (symmetric) {
      ok[r] = symmarMemAlloc(w.comm(r), kMaxBytes, &b->send[r]) == symmarSuccess &&
              symmarMemAlloc(w.comm(r), kMaxBytes, &b->recv[r]) == symmarSuccess;
    } else {
      ok[r] = cudaMalloc(&b->send[r], kMaxBytes) == cudaSuccess && cudaMalloc(&b->recv[r], kMaxBytes) == cudaSuccess;
    }
  });
  for (int v : ok) {
    if (!v) return false;
  }
  return true;
}

void freeBuffers(const LocalWorld& w, Buffers* b) {
  w.parallel([&](int r) {
    if (b->symmetric) {
      symmarMemFree(w.comm(r), b->recv[r]);
      symmarMemFree(w.comm(r), b->send[r]);
    } else {
      cudaFree(b->send[r]);
      cudaFree(b->recv[r]);
    }
  });
}

/// One allreduce on every rank and its check. Returns "" on success, else what went wrong.
std::string runCase(const LocalWorld& w, const Buffers& b, int mode, symmarAlgo_t algo, symmarDataType_t t,
                    symmarRedOp_t op, size_t count, uint32_t seed) {
  const int n = w.size();
  const size_t es = testref::elementSize(t);
  const size_t bytes = count * es;
  const size_t shift = mode == kUnaligned ? es : 0;  // element-aligned, not vector-aligned
  const bool in_place = mode == kInPlace || mode == kSymmetricIn;
  std::vector<std::vector<unsigned char>> in(static_cast<size_t>(n));
  std::vector<char*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    in[r] = makeInput(t, count, r, seed);
    send[r] = static_cast<char*>(b.send[r]) + shift;
    recv[r] = in_place ? send[r] : static_cast<char*>(b.recv[r]) + shift;
    cudaSetDevice(w.device(r));
    // On the rank's own (non-blocking) stream, so the allreduce after them never reads inputs
    // still in flight.
    if (count && cudaMemcpyAsync(send[r], in[r].data(), bytes, cudaMemcpyHostToDevice, w.stream(r)) != cudaSuccess) {
      return "H2D copy";
    }
    if (!in_place && cudaMemsetAsync(recv[r], 0xff, bytes + es, w.stream(r)) != cudaSuccess) return "memset";
  }
  for (int r = 0; r < n; ++r) {
    symmarResult_t res = symmarAllReduceAlgo(send[r], recv[r], count, t, op, algo, w.comm(r), w.stream(r));
    if (res != symmarSuccess) {
      return std::string("rank ") + std::to_string(r) + ": " + symmarGetErrorString(res) + ": " +
             symmarGetLastError(w.comm(r));
    }
  }
  if (cudaError_t e = w.sync(); e != cudaSuccess) return std::string("stream sync: ") + cudaGetErrorString(e);
  if (count == 0) return "";
  const std::vector<double> ref = testref::reduceBuffers(t, op, in, count);
  std::vector<unsigned char> first(bytes), out(bytes);
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char>& dst = r == 0 ? first : out;
    if (cudaMemcpy(dst.data(), recv[r], bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return "D2H copy";
    if (r > 0 && std::memcmp(first.data(), out.data(), bytes) != 0) {
      size_t i = 0;
      while (std::memcmp(&first[i * es], &out[i * es], es) == 0) ++i;
      return "rank " + std::to_string(r) + " differs from rank 0 at element " + std::to_string(i);
    }
  }
  return testref::checkResult(t, first.data(), ref.data(), count, n, testref::Match::kSumTolerance);
}

void sweep(const LocalWorld& w, symmarAlgo_t algo) {
  for (int mode = 0; mode < kNumModes; ++mode) {
    Buffers b;
    const bool symmetric = mode == kSymmetricOut || mode == kSymmetricIn;
    ASSERT_TRUE(allocBuffers(w, symmetric, &b)) << "buffer allocation failed (" << modeName(mode) << ")";
    uint32_t seed = 1;
    for (symmarDataType_t t : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      for (symmarRedOp_t op : {symmarSum, symmarMax, symmarMin}) {
        if (algo == symmarAlgoMultimem && t == symmarFloat32 && op != symmarSum) continue;
        for (size_t count : testCounts(t)) {
          // lamport serves messages up to its limit only; larger ones are refused by design.
          if (algo == symmarAlgoLamport && count * testref::elementSize(t) > SYMMAR_LAMPORT_MAX_BYTES) continue;
          std::string err = runCase(w, b, mode, algo, t, op, count, ++seed);
          ASSERT_EQ("", err) << symmarAlgoName(algo) << " world " << w.size() << " dtype " << t << " op " << op
                             << " count " << count << " " << modeName(mode);
        }
      }
    }
    freeBuffers(w, &b);
  }
}

class SharedGpuSweep : public ::testing::TestWithParam<std::tuple<symmarAlgo_t, int>> {};

TEST_P(SharedGpuSweep, MatchesReference) {
  SKIP_WITHOUT_GPU();
  const symmarAlgo_t algo = std::get<0>(GetParam());
  const int world = std::get<1>(GetParam());
  LocalWorld w(std::vector<int>(static_cast<size_t>(world), 0), kTimeoutMs, kStaging);
  ASSERT_TRUE(w.ok()) << w.error();
  sweep(w, algo);
}

INSTANTIATE_TEST_SUITE_P(Algos, SharedGpuSweep,
                         ::testing::Combine(::testing::Values(symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoLamport),
                                            ::testing::Values(2, 3, 4, 5, 8)),
                         [](const auto& info) {
                           return std::string(symmarAlgoName(std::get<0>(info.param))) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

/// One rank per GPU: real peer links (NVLink or PCIe P2P).
TEST(DistinctGpus, OneShotAndTwoShot) {
  std::string why;
  const int gpus = gpuCount(&why);
  if (gpus < 2) GTEST_SKIP() << "needs 2+ GPUs (" << gpus << " present) " << why;
  std::vector<int> devices;
  for (int d = 0; d < std::min(gpus, 8); ++d) devices.push_back(d);
  LocalWorld w(devices, kTimeoutMs, kStaging);
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  if (topo.link == symmarLinkUnknown) GTEST_SKIP() << "no peer access between the GPUs";
  sweep(w, symmarAlgoOneShot);
  sweep(w, symmarAlgoTwoShot);
}

TEST(DistinctGpus, Multimem) {
  std::string why;
  const int gpus = gpuCount(&why);
  if (gpus < 2) GTEST_SKIP() << "multimem needs a multicast object over 2+ GPUs behind an NVSwitch (" << gpus
                             << " GPU present) " << why;
  std::vector<int> devices;
  for (int d = 0; d < std::min(gpus, 8); ++d) devices.push_back(d);
  LocalWorld w(devices, kTimeoutMs, kStaging);
  ASSERT_TRUE(w.ok()) << w.error();
  symmarTopology_t topo;
  SYMMAR_OK(symmarCommTopology(w.comm(0), &topo));
  if (!topo.multicast) GTEST_SKIP() << "no multicast: the GPUs are not behind an NVSwitch with multicast (link " << topo.link << ")";
  sweep(w, symmarAlgoMultimem);
}

}  // namespace
}  // namespace symmar_gpu_test

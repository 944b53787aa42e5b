// Ranks as threads of one process on one GPU, each making its own stream and buffers and issuing
// its calls from its own thread, waiting for each, as symmar_perf and symmar_norm_perf_gpu do (the
// other GPU tests issue every rank's call from one thread, all before any waits). On the H200 this
// shape timed out at a run's first call: one rank's first kernel stayed queued (cuda-gdb showed
// its peers' kernels resident and its own absent, every rank's host thread waiting on its event)
// until its peers had given up. It followed what the rank's thread had done last before the ranks
// met: allocated memory and created its events (cudaMalloc, cudaMallocHost and cudaFreeHost,
// cudaEventCreate) with nothing completed on the GPU since: held in 12 of 18 runs (after only a
// pageable copy, in about a third); after a completed memset or synchronous copy, in none of 37.
// So each rank here ends its set-up with a completed memset on its stream (RankBuffers::make), as
// the benchmarks do, and times its calls with events; without that memset this test failed on
// the H200 in 2 of 4 runs. Each case makes fresh comms and such a run, so that a hang of that
// kind fails here (after the timeout).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu/driver.h"
#include "gpu/kernel_launch.h"
#include "gpu_test_util.h"

namespace symmar_gpu_test {
namespace {

// ctest runs each test in a process of its own: here nothing has launched a kernel before.
TEST(GpuKernelLoading, CommCreationLoadsEveryKernelACallCanLaunch) {
  SKIP_WITHOUT_GPU();
  LocalWorld w({0, 0}, 2000, size_t{1} << 20);
  ASSERT_TRUE(w.ok()) << w.error();
  CUDA_OK(cudaSetDevice(0));
  size_t listed = 0, unknown = 0, unloaded = 0;
  for (const symmar::gpu::KernelShape& k : symmar::gpu::everyKernel()) {
    if (!k.kernel) continue;
    ++listed;
    const int state = symmar::gpu::kernelLoaded(k.kernel);
    unknown += state < 0;
    unloaded += state == 0;
  }
  if (unknown == listed) GTEST_SKIP() << "this driver cannot say whether a kernel is loaded (cuFuncIsLoaded: 12.4+)";
  EXPECT_EQ(0u, unloaded) << "of " << listed << " kernels, " << unloaded << " not loaded after comm creation";
  EXPECT_EQ(0u, unknown);
}

enum class Kind { kOneShot, kTwoShot, kLamport, kFused };

struct Case {
  const char* name;
  Kind first, second;  ///< the calls take turns in runs of kRun, first kind first
  int world;
  bool p2p_off;  ///< SYMMAR_P2P=off: the kernels stage through pinned host memory
  /// >= 0: after this call rank 0 allocates and frees device and pinned memory while its peers'
  /// next kernels may already spin for it, then settles as docs/integration.md says (a completed
  /// memset on its stream) before its next call.
  int alloc_after = -1;
};

constexpr int kTimeoutMs = 3000;
constexpr int kCalls = 48;  // about the calls at the first size of a benchmark run
constexpr int kRun = 12;
constexpr size_t kHidden = 7168;

/// One call of kind k on rank r's stream: the fused call over a bf16 row of kHidden (residual in
/// place, gamma 0 makes the norm 0), an allreduce of the case's small count otherwise.
symmarResult_t issue(Kind k, size_t count, void* in, void* out, void* norm, void* gamma, symmarComm_t comm,
                     cudaStream_t s) {
  if (k == Kind::kFused) {
    symmarAddRmsNormArgs_t a{};
    a.input = in;
    a.residual_in = out;
    a.residual_out = out;
    a.norm_out = norm;
    a.gamma = gamma;
    a.eps = 1e-6f;
    a.tokens = 1;
    a.hidden = kHidden;
    a.dtype = symmarBfloat16;
    return symmarAllReduceAddRmsNorm(&a, comm, s);
  }
  const symmarAlgo_t algo =
      k == Kind::kLamport ? symmarAlgoLamport : (k == Kind::kTwoShot ? symmarAlgoTwoShot : symmarAlgoOneShot);
  return symmarAllReduceAlgo(in, out, count, symmarFloat32, symmarSum, algo, comm, s);
}

/// One rank's stream and buffers, with its input uploaded.
struct RankBuffers {
  RankBuffers() = default;
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;  ///< around each call, as the benchmarks time it
  void *in = nullptr, *out = nullptr, *norm = nullptr, *gamma = nullptr;

  /// Allocates and uploads rank r's part; "" on success. Ends with a completed memset on the
  /// stream: a kernel launched after this thread allocated device memory may be held until every
  /// kernel running on the GPU has finished (seen on an H200), so a rank that allocates must let
  /// that settle before its peers' kernels can spin waiting for it.
  std::string make(int r) {
    cudaSetDevice(0);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return "stream";
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return "events";
    const size_t bytes = kHidden * 4;  // room for the fused call's bf16 row
    for (void** p : {&in, &out, &norm, &gamma}) {
      if (cudaMalloc(p, bytes) != cudaSuccess) return "cudaMalloc";
    }
    const std::vector<float> host(kHidden, static_cast<float>(r + 1));
    // The fused call reads these floats as pairs of finite bf16.
    cudaMemcpyAsync(in, host.data(), bytes, cudaMemcpyHostToDevice, stream);  // pageable, as the benchmarks
    cudaMemsetAsync(out, 0, bytes, stream);
    cudaMemsetAsync(gamma, 0, bytes, stream);
    return cudaStreamSynchronize(stream) == cudaSuccess ? "" : "upload";
  }
  ~RankBuffers() {
    for (void* p : {in, out, norm, gamma}) cudaFree(p);
    for (cudaEvent_t e : {start, stop}) {
      if (e) cudaEventDestroy(e);
    }
    if (stream) cudaStreamDestroy(stream);
  }
};

/// Rank 0's allocations between two calls, then the settling memset; "" on success.
std::string allocateMidRunAndSettle(const RankBuffers& b) {
  void* dev = nullptr;
  void* pinned = nullptr;
  if (cudaMalloc(&dev, size_t{1} << 20) != cudaSuccess || cudaMallocHost(&pinned, size_t{1} << 20) != cudaSuccess) {
    return "mid-run allocation";
  }
  cudaFree(dev);
  cudaFreeHost(pinned);
  cudaMemsetAsync(b.norm, 0, 1, b.stream);  // norm is written by no call before the next
  return cudaStreamSynchronize(b.stream) == cudaSuccess ? "" : "settling after the mid-run allocation";
}

/// Rank r's part: its buffers, the barrier, kCalls calls each waited for, and the check of the
/// last (an allreduce: every element the sum of the ranks' r + 1). "" on success.
std::string rankEarlyCalls(const Case& c, int r, symmarComm_t comm, std::atomic<int>* arrived) {
  cudaSetDevice(0);
  RankBuffers b;
  std::string error = b.make(r);
  const size_t count = c.first == Kind::kLamport ? 1 : 2;  // 4 and 8 bytes, as seen
  arrived->fetch_add(1);  // every rank arrives, failed or not
  while (arrived->load() < c.world) std::this_thread::yield();
  // From here on no CUDA call but the collective's and the events around it, as the benchmarks
  // time each call. On a failure the times say where this rank was: a launch that returned late
  // blocked in the host thread; one that returned on time left the wait to the GPU.
  const auto start = std::chrono::steady_clock::now();
  const auto ms = [&start] {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count() /
        1000.0);
  };
  for (int k = 0; k < kCalls && error.empty(); ++k) {
    const Kind kind = (k / kRun) % 2 == 0 ? c.first : c.second;
    const std::string issued = ms();
    cudaEventRecord(b.start, b.stream);
    const symmarResult_t res = issue(kind, count, b.in, b.out, b.norm, b.gamma, comm, b.stream);
    cudaEventRecord(b.stop, b.stream);
    const std::string returned = ms();
    symmarResult_t async = symmarSuccess;
    if (res != symmarSuccess || cudaEventSynchronize(b.stop) != cudaSuccess ||
        symmarCommGetAsyncError(comm, &async) != symmarSuccess || async != symmarSuccess) {
      error = "call " + std::to_string(k) + " (issued at " + issued + " ms, returned at " + returned +
              " ms, waited for until " + ms() + " ms): " + symmarGetLastError(comm);
    }
    if (r == 0 && k == c.alloc_after && error.empty()) error = allocateMidRunAndSettle(b);
  }
  if (error.empty()) {
    std::vector<float> got(count);
    cudaMemcpy(got.data(), b.out, count * 4, cudaMemcpyDeviceToHost);
    const float want = static_cast<float>(c.world * (c.world + 1) / 2);
    for (size_t i = 0; i < count && error.empty(); ++i) {
      if (got[i] != want) error = "element " + std::to_string(i) + " is " + std::to_string(got[i]);
    }
  }
  return error.empty() ? error : "rank " + std::to_string(r) + ": " + error;
}

/// A fresh comm of c.world ranks on GPU 0 and one thread per rank; "" when every rank's calls
/// succeeded, else every failing rank's failure, a line each.
std::string earlyCallsFromRankThreads(const Case& c) {
  if (c.p2p_off) setenv("SYMMAR_P2P", "off", 1);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = 0;
  cfg.timeout_ms = kTimeoutMs;
  std::vector<int> devices(static_cast<size_t>(c.world), 0);
  std::vector<symmarComm_t> comms(static_cast<size_t>(c.world), nullptr);
  const symmarResult_t init = symmarCommInitAll(comms.data(), c.world, devices.data(), &cfg);
  if (c.p2p_off) unsetenv("SYMMAR_P2P");
  if (init != symmarSuccess) return std::string("comm creation: ") + symmarGetLastError(nullptr);
  std::atomic<int> arrived{0};
  std::vector<std::string> errors(static_cast<size_t>(c.world));
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world; ++r) {
    threads.emplace_back(
        [&, r] { errors[static_cast<size_t>(r)] = rankEarlyCalls(c, r, comms[static_cast<size_t>(r)], &arrived); });
  }
  for (std::thread& t : threads) t.join();
  for (symmarComm_t comm : comms) symmarCommDestroy(comm);
  std::string all;  // every rank's: the late one's times and its peers' together
  for (const std::string& e : errors) {
    if (!e.empty()) all += (all.empty() ? "" : "\n  ") + e;
  }
  return all;
}

TEST(GpuRankThreads, EarlyCallsOfEachKindFromTheirOwnThreads) {
  SKIP_WITHOUT_GPU();
  const Case cases[] = {{"one-shot and two-shot through peer memory", Kind::kOneShot, Kind::kTwoShot, 4, false},
                        {"lamport and one-shot", Kind::kLamport, Kind::kOneShot, 4, false},
                        {"one-shot and two-shot through host memory", Kind::kOneShot, Kind::kTwoShot, 4, true},
                        {"fused add + RMSNorm and one-shot", Kind::kFused, Kind::kOneShot, 2, false},
                        {"one-shot and lamport, rank 0 allocating after call 10", Kind::kOneShot, Kind::kLamport, 4,
                         false, 10}};
  for (const Case& c : cases) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::string error = earlyCallsFromRankThreads(c);
      EXPECT_EQ("", error) << c.name << ", attempt " << attempt;
      if (!error.empty()) break;  // each failure costs the timeout: one per case says enough
    }
  }
}

}  // namespace
}  // namespace symmar_gpu_test

// symmar_norm_perf_gpu: the fused allreduce + residual add + RMSNorm (symmarAllReduceAddRmsNorm) on
// GPUs against what an engine runs without it: an allreduce, then its own add + RMSNorm kernel
// (addRmsNormRows below: one block per token, 16-byte loads, the sum of squares in fp32, as engines'
// fused_add_rms_norm kernels do). The allreduce alone is timed too: the fused call's cost over the
// bare collective. bf16 rows, ranks as threads of this process, rank r on device r % (devices), each
// on a stream of its own. The variants take turns in runs of --block calls (each run timed with CUDA
// events on the rank's stream, its first call untimed); printed: the median per call over runs, of
// the slowest rank. The fused call is timed as the planner serves it and in each of its forms
// (one-shot, two-shot, and lamport where the call fits a lamport slot; symmarAllReduceAddRmsNormAlgo),
// the data for its table row. Before the
// timing, for each token count, each fused form and the allreduce + separate pass run once from the
// same inputs and must agree (exit 1 where they do not). --out FILE writes the fused call's table
// row measured here (tune_table.h's tuneFusedRow: a form while it keeps up with the allreduce + the
// separate kernel, the unfused path past it), keyed by the comm's architecture, link and world.
//
//   symmar_norm_perf_gpu [--local-world N] [--hidden 7168] [--tokens 1,2,4,...] [-n iters] [--block 10]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/names.h"
#include "perf_group.h"
#include "plan/table.h"
#include "symmar/symmar.h"
#include "tune_table.h"

namespace {

constexpr int kThreads = 256;
constexpr int kVecElems = 8;  // bf16 per 16-byte load

struct Options {
  int world = 2;
  int hidden = 7168;
  std::vector<int> tokens = {1, 2, 4, 8, 16, 32, 64};
  int iters = 200;
  int block = 10;
  std::string out;  ///< where to write the measured addrmsnorm row ("": none)
  double margin = 0.05;
};

__device__ float blockSum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kThreads / 32 ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // the block's sum, in every thread
}

// residual += sum (rounded to bf16 as stored); norm = residual * rsqrt(mean(residual^2) + eps) * gamma.
__global__ void __launch_bounds__(kThreads)
    addRmsNormRows(const uint4* sum, uint4* residual, uint4* norm, const uint4* gamma, int vecs, float eps) {
  __shared__ float shared[kThreads / 32];
  const size_t row = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(vecs);
  float squares = 0.f;
  for (int v = threadIdx.x; v < vecs; v += kThreads) {
    uint4 s = sum[row + v], r = residual[row + v];
    __nv_bfloat162* sp = reinterpret_cast<__nv_bfloat162*>(&s);
    __nv_bfloat162* rp = reinterpret_cast<__nv_bfloat162*>(&r);
    for (int i = 0; i < kVecElems / 2; ++i) {
      const float2 a = __bfloat1622float2(sp[i]), b = __bfloat1622float2(rp[i]);
      rp[i] = __floats2bfloat162_rn(a.x + b.x, a.y + b.y);
      const float2 stored = __bfloat1622float2(rp[i]);
      squares += stored.x * stored.x + stored.y * stored.y;
    }
    residual[row + v] = r;
  }
  const float scale = rsqrtf(blockSum(squares, shared) / static_cast<float>(vecs * kVecElems) + eps);
  for (int v = threadIdx.x; v < vecs; v += kThreads) {
    uint4 r = residual[row + v], g = gamma[v], out;
    const __nv_bfloat162* rp = reinterpret_cast<const __nv_bfloat162*>(&r);
    const __nv_bfloat162* gp = reinterpret_cast<const __nv_bfloat162*>(&g);
    __nv_bfloat162* op = reinterpret_cast<__nv_bfloat162*>(&out);
    for (int i = 0; i < kVecElems / 2; ++i) {
      const float2 a = __bfloat1622float2(rp[i]), w = __bfloat1622float2(gp[i]);
      op[i] = __floats2bfloat162_rn(a.x * scale * w.x, a.y * scale * w.y);
    }
    norm[row + v] = out;
  }
}

// Values that are multiples of 1/8 below 2 in magnitude: every sum of a few of them is exact in
// bf16, so the fused call's residual and the separate pass's are the same bits (the norms may
// differ in the last place: each is rounded once from fp32 math done in another order).
__global__ void fillRows(__nv_bfloat16* p, size_t n, int salt, int period) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = __float2bfloat16_rn(
        static_cast<float>((i * 7 + static_cast<size_t>(salt)) % static_cast<size_t>(period)) / 8.f - 0.75f);
  }
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--local-world") {
      o->world = std::atoi(v);
    } else if (a == "--hidden") {
      o->hidden = std::atoi(v);
    } else if (a == "-n") {
      o->iters = std::atoi(v);
    } else if (a == "--block") {
      o->block = std::atoi(v);
    } else if (a == "--out") {
      o->out = v;
    } else if (a == "--margin") {
      o->margin = std::atof(v);
    } else if (a == "--tokens") {
      o->tokens.clear();
      for (char* p = const_cast<char*>(v); *p;) {
        o->tokens.push_back(static_cast<int>(std::strtol(p, &p, 10)));
        if (*p == ',') {
          ++p;
        } else if (*p) {
          return false;  // not a number list
        }
      }
    } else {
      return false;
    }
  }
  const bool tokens_ok = !o->tokens.empty() && *std::min_element(o->tokens.begin(), o->tokens.end()) > 0;
  return o->world >= 1 && o->hidden > 0 && o->hidden % kVecElems == 0 && o->iters > 0 && o->block > 1 && tokens_ok &&
         o->margin >= 0;
}

enum Variant { kFused, kFusedOneShot, kFusedTwoShot, kFusedLamport, kSeparate, kAllReduce, kVariants };
constexpr Variant kFusedForms[] = {kFused, kFusedOneShot, kFusedTwoShot, kFusedLamport};

/// Whether variant v takes part for tokens rows of hidden bf16: the lamport form only where it fits a
/// call (at most SYMMAR_LAMPORT_MAX_BYTES; hidden is a whole number of vectors here).
bool takesPart(Variant v, int tokens, int hidden) {
  return v != kFusedLamport ||
         static_cast<size_t>(tokens) * static_cast<size_t>(hidden) * 2 <= SYMMAR_LAMPORT_MAX_BYTES;
}

/// One rank's buffers and stream for one token count.
struct Rank {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void *in = nullptr, *residual = nullptr, *norm = nullptr, *sum = nullptr, *gamma = nullptr;
  void *saved_residual = nullptr, *fused_residual = nullptr, *fused_norm = nullptr;  // the check's copies
  std::vector<float> per_call[kVariants];  // us per call, one entry per timed run
};

/// What one call of variant v enqueues on the rank's stream.
symmarResult_t call(Variant v, Rank& k, symmarComm_t comm, int tokens, int hidden) {
  const size_t n = static_cast<size_t>(tokens) * static_cast<size_t>(hidden);
  if (v == kFused || v == kFusedOneShot || v == kFusedTwoShot || v == kFusedLamport) {
    symmarAddRmsNormArgs_t a{};
    a.input = k.in;
    a.residual_in = k.residual;
    a.residual_out = k.residual;
    a.norm_out = k.norm;
    a.gamma = k.gamma;
    a.eps = 1e-6f;
    a.tokens = static_cast<size_t>(tokens);
    a.hidden = static_cast<size_t>(hidden);
    a.dtype = symmarBfloat16;
    const symmarAlgo_t algo = v == kFusedOneShot   ? symmarAlgoOneShot
                              : v == kFusedTwoShot ? symmarAlgoTwoShot
                              : v == kFusedLamport ? symmarAlgoLamport
                                                   : symmarAlgoAuto;
    return symmarAllReduceAddRmsNormAlgo(&a, algo, comm, k.stream);
  }
  const symmarResult_t res = symmarAllReduce(k.in, k.sum, n, symmarBfloat16, symmarSum, comm, k.stream);
  if (v == kAllReduce || res != symmarSuccess) return res;
  addRmsNormRows<<<tokens, kThreads, 0, k.stream>>>(static_cast<const uint4*>(k.sum), static_cast<uint4*>(k.residual),
                                                    static_cast<uint4*>(k.norm), static_cast<const uint4*>(k.gamma),
                                                    hidden / kVecElems, 1e-6f);
  return cudaGetLastError() == cudaSuccess ? symmarSuccess : symmarCudaError;
}

/// The fused call in form fused and the allreduce + separate pass from the same inputs: the same
/// residual bits and norms within 2% (a bf16 place is 0.4-0.8%). Leaves the buffers filled for the
/// timing.
bool checkOnce(int r, symmarComm_t comm, const Options& o, int tokens, Variant fused, Rank& k, std::string* error) {
  const size_t n = static_cast<size_t>(tokens) * static_cast<size_t>(o.hidden);
  const auto bf = [](void* p) { return static_cast<__nv_bfloat16*>(p); };
  fillRows<<<64, kThreads, 0, k.stream>>>(bf(k.in), n, r, 13);
  fillRows<<<64, kThreads, 0, k.stream>>>(bf(k.residual), n, 5, 11);
  fillRows<<<8, kThreads, 0, k.stream>>>(bf(k.gamma), static_cast<size_t>(o.hidden), 11, 15);
  // Between the calls, copies on the device only: the host reads everything after the stream sync.
  cudaMemcpyAsync(k.saved_residual, k.residual, n * 2, cudaMemcpyDeviceToDevice, k.stream);
  symmarResult_t res = call(fused, k, comm, tokens, o.hidden);  // residual in place, norm
  cudaMemcpyAsync(k.fused_residual, k.residual, n * 2, cudaMemcpyDeviceToDevice, k.stream);
  cudaMemcpyAsync(k.fused_norm, k.norm, n * 2, cudaMemcpyDeviceToDevice, k.stream);
  cudaMemcpyAsync(k.residual, k.saved_residual, n * 2, cudaMemcpyDeviceToDevice, k.stream);
  if (res == symmarSuccess) res = call(kSeparate, k, comm, tokens, o.hidden);
  // A kernel that gave up (a timeout) leaves its outputs unwritten: its failure, not a mismatch.
  symmarResult_t async = symmarSuccess;
  if (res != symmarSuccess || cudaStreamSynchronize(k.stream) != cudaSuccess ||
      symmarCommGetAsyncError(comm, &async) != symmarSuccess || async != symmarSuccess) {
    *error =
        "rank " + std::to_string(r) + ": " + symmarGetLastError(comm) + " / " + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  std::vector<uint16_t> fused_res(n), fused_norm(n), sep_res(n), sep_norm(n);
  cudaMemcpy(fused_res.data(), k.fused_residual, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(fused_norm.data(), k.fused_norm, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(sep_res.data(), k.residual, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(sep_norm.data(), k.norm, n * 2, cudaMemcpyDeviceToHost);
  const auto value = [](uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  };
  size_t bad = 0, first = n;
  for (size_t i = 0; i < n; ++i) {
    const float a = value(fused_norm[i]), b = value(sep_norm[i]);
    if (fused_res[i] != sep_res[i] || !(std::fabs(a - b) <= 0.02f * std::max(std::fabs(a), std::fabs(b)) + 1e-3f)) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return true;
  *error = "rank " + std::to_string(r) + ": the fused call (variant " + std::to_string(fused) +
           ": 0 as planned, 1 one-shot, 2 two-shot, 3 lamport) and the separate pass disagree at " + std::to_string(bad) +
           " of " + std::to_string(n) + " elements, first at " + std::to_string(first) + " (residual " +
           std::to_string(value(fused_res[first])) + " / " + std::to_string(value(sep_res[first])) + ", norm " +
           std::to_string(value(fused_norm[first])) + " / " + std::to_string(value(sep_norm[first])) + ")";
  return false;
}

/// Runs every variant in turns on this rank; false (with a message) on the first failure.
/// The rank threads meet (group.sumOf) between set-up, the check and the timing. A rank's kernels
/// spin until its peers' arrive, and while they spin, a CUDA call of another thread that waits for
/// the device (an allocation, a copy from or to pageable memory) can keep that peer from launching
/// its own: so no rank starts a phase while another still makes such calls.
bool runRank(int r, int device, symmarComm_t comm, const Options& o, int tokens, Rank& k, perf::Group& group,
             std::string* error) {
  const size_t bytes = static_cast<size_t>(tokens) * static_cast<size_t>(o.hidden) * 2;
  const size_t gamma_bytes = static_cast<size_t>(o.hidden) * 2;
  cudaError_t err = cudaSetDevice(device);
  const auto next = [&err](cudaError_t e) { err = err != cudaSuccess ? err : e; };
  next(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
  next(cudaEventCreate(&k.start));
  next(cudaEventCreate(&k.stop));
  for (void** p : {&k.in, &k.residual, &k.norm, &k.sum, &k.saved_residual, &k.fused_residual, &k.fused_norm}) {
    next(cudaMalloc(p, bytes));
  }
  next(cudaMalloc(&k.gamma, gamma_bytes));
  if (err == cudaSuccess) {
    // This program's own kernels run once here, to completion, before the ranks meet: a kernel
    // launched after this thread allocated memory may wait for every kernel running on the GPU,
    // peers' that spin for this rank among them (docs/integration.md), and a first launch may load.
    const auto bf = [](void* p) { return static_cast<__nv_bfloat16*>(p); };
    const size_t row = static_cast<size_t>(o.hidden);
    fillRows<<<1, kThreads, 0, k.stream>>>(bf(k.sum), row, r, 13);
    fillRows<<<1, kThreads, 0, k.stream>>>(bf(k.residual), row, 5, 11);
    fillRows<<<1, kThreads, 0, k.stream>>>(bf(k.gamma), row, 11, 15);
    addRmsNormRows<<<1, kThreads, 0, k.stream>>>(static_cast<const uint4*>(k.sum), static_cast<uint4*>(k.residual),
                                                 static_cast<uint4*>(k.norm), static_cast<const uint4*>(k.gamma),
                                                 o.hidden / kVecElems, 1e-6f);
    next(cudaGetLastError());
    next(cudaStreamSynchronize(k.stream));
  }
  if (err != cudaSuccess) *error = "rank " + std::to_string(r) + ": CUDA set-up failed: " + cudaGetErrorString(err);
  if (group.sumOf(err == cudaSuccess ? 0 : 1) != 0) return false;  // every rank arrives, failed or not
  for (Variant fused : kFusedForms) {
    if (!takesPart(fused, tokens, o.hidden)) continue;
    if (group.sumOf(checkOnce(r, comm, o, tokens, fused, k, error) ? 0 : 1) != 0) return false;
  }
  const int runs = std::max(1, o.iters / o.block);
  for (int run = 0; run <= runs; ++run) {  // run 0 warms up, untimed
    for (int v = 0; v < kVariants; ++v) {
      const Variant var = static_cast<Variant>((v + run) % kVariants);  // each goes first in turn
      if (!takesPart(var, tokens, o.hidden)) continue;
      symmarResult_t res = call(var, k, comm, tokens, o.hidden);        // the run's first call: untimed
      cudaEventRecord(k.start, k.stream);
      for (int i = 1; i < o.block && res == symmarSuccess; ++i) res = call(var, k, comm, tokens, o.hidden);
      cudaEventRecord(k.stop, k.stream);
      float ms = 0;
      symmarResult_t async = symmarSuccess;
      if (res != symmarSuccess || cudaEventSynchronize(k.stop) != cudaSuccess ||
          cudaEventElapsedTime(&ms, k.start, k.stop) != cudaSuccess ||
          symmarCommGetAsyncError(comm, &async) != symmarSuccess || async != symmarSuccess) {
        *error = "rank " + std::to_string(r) + ": " + symmarGetLastError(comm);
        return false;
      }
      if (run > 0) k.per_call[var].push_back(ms * 1000.f / static_cast<float>(o.block - 1));
    }
  }
  return true;
}

void release(Rank& k) {
  for (void* p : {k.in, k.residual, k.norm, k.sum, k.gamma, k.saved_residual, k.fused_residual, k.fused_norm}) {
    cudaFree(p);
  }
  if (k.start) cudaEventDestroy(k.start);
  if (k.stop) cudaEventDestroy(k.stop);
  if (k.stream) cudaStreamDestroy(k.stream);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.f : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // Ranks as threads on one GPU spin on each other: their streams need hardware queues of their
  // own (the default 8 can put two ranks' streams in one queue, one rank's kernel then waits behind
  // a peer's that waits for it). Read at context creation; a user's own value wins.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s [--local-world N] [--hidden H (a multiple of 8)] [--tokens 1,2,4] [-n iters] "
            "[--block N (2 or more)] [--out FILE] [--margin 0.05]\n",
            argv[0]);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  std::vector<int> device_of(static_cast<size_t>(o.world));
  for (int r = 0; r < o.world; ++r) device_of[static_cast<size_t>(r)] = r % devices;
  std::vector<symmarComm_t> comms(static_cast<size_t>(o.world));
  if (symmarCommInitAll(comms.data(), o.world, device_of.data(), nullptr) != symmarSuccess) {
    fprintf(stderr, "init failed: %s\n", symmarGetLastError(nullptr));
    return 1;
  }
  printf(
      "# symmar_norm_perf_gpu: %d ranks (threads) on %d GPU(s), hidden %d, bf16, %d calls a variant in runs "
      "of %d, median us per call of the slowest rank\n",
      o.world, std::min(devices, o.world), o.hidden, o.iters, o.block);
  printf("#%9s %12s %12s %9s %12s %13s %10s %10s %10s\n", "tokens", "fused", "separate", "speed-up", "allreduce",
         "fused/allred", "1-shot", "2-shot", "lamport");
  int status = 0;
  std::vector<tune::FusedMeasurement> measured;  // --out: the forms and the separate pass, by size
  for (int tokens : o.tokens) {
    std::vector<Rank> ranks(static_cast<size_t>(o.world));
    std::vector<std::string> errors(static_cast<size_t>(o.world));
    std::vector<std::thread> threads;
    perf::ThreadShared shared(o.world);
    for (int r = 0; r < o.world; ++r) {
      threads.emplace_back([&, r] {
        const std::unique_ptr<perf::Group> group = perf::makeThreadGroup(&shared, r, o.world);
        runRank(r, device_of[static_cast<size_t>(r)], comms[static_cast<size_t>(r)], o, tokens,
                ranks[static_cast<size_t>(r)], *group, &errors[static_cast<size_t>(r)]);
      });
    }
    for (std::thread& t : threads) t.join();
    float worst[kVariants] = {};
    for (int r = 0; r < o.world; ++r) {
      if (!errors[static_cast<size_t>(r)].empty()) {
        fprintf(stderr, "tokens %d: %s\n", tokens, errors[static_cast<size_t>(r)].c_str());
        status = 1;
      }
      for (int v = 0; v < kVariants; ++v) {
        worst[v] = std::max(worst[v], median(ranks[static_cast<size_t>(r)].per_call[v]));
      }
      cudaSetDevice(device_of[static_cast<size_t>(r)]);
      release(ranks[static_cast<size_t>(r)]);
    }
    if (status != 0) break;
    measured.push_back({static_cast<size_t>(tokens) * static_cast<size_t>(o.hidden) * 2, worst[kFusedOneShot],
                        worst[kFusedTwoShot], worst[kSeparate], worst[kFusedLamport]});
    printf("%10d %12.2f %12.2f %8.2fx %12.2f %12.2fx %10.2f %10.2f %10.2f\n", tokens, worst[kFused],
           worst[kSeparate], worst[kSeparate] / worst[kFused], worst[kAllReduce], worst[kFused] / worst[kAllReduce],
           worst[kFusedOneShot], worst[kFusedTwoShot], worst[kFusedLamport]);
  }
  if (!o.out.empty() && status == 0) {
    symmarTopology_t topo{};
    symmarCommTopology(comms[0], &topo);
    const std::string source = "symmar_norm_perf_gpu, " + std::to_string(o.world) + " ranks on " +
                               std::to_string(std::min(devices, o.world)) + " GPU(s), hidden " +
                               std::to_string(o.hidden) + " bf16, margin " + std::to_string(o.margin);
    const std::string json = tune::tableFileJson(symmar::archKeyName(symmar::archOf(topo.cc_major, topo.cc_minor)),
                                                 symmar::linkName(topo.link), o.world,
                                                 tune::tuneFusedRow(measured, o.margin), source, 1, "addrmsnorm");
    FILE* f = fopen(o.out.c_str(), "w");
    const bool written = f && fputs(json.c_str(), f) >= 0;
    if (f) fclose(f);
    printf("# %s the addrmsnorm row measured here to %s\n", written ? "wrote" : "could not write", o.out.c_str());
    if (!written) status = 1;
  }
  for (symmarComm_t c : comms) symmarCommDestroy(c);
  return status;
}

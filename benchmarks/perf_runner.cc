#include "perf_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "core/names.h"
#include "core/numeric.h"
#include "perf_schedule.h"

#include "perf_cuda.h"

namespace perf {
namespace {

// Small integers: exact in every dtype and in sums over up to 8 ranks.
double inputValue(int rank, size_t i) { return static_cast<double>(static_cast<int>((rank * 3 + i) % 11) - 5); }

double expectedValue(int world, size_t i, symmarRedOp_t op) {
  double acc = inputValue(0, i);
  for (int r = 1; r < world; ++r) {
    double x = inputValue(r, i);
    acc = op == symmarSum ? acc + x : (op == symmarMax ? std::max(acc, x) : std::min(acc, x));
  }
  return acc;
}

/// What rank `rank` must hold at element i of the output of opt's collective.
double expectedAt(const Options& opt, int world, int rank, size_t per_rank, size_t i) {
  switch (opt.coll) {
    case symmar::Collective::kReduceScatter: return expectedValue(world, static_cast<size_t>(rank) * per_rank + i, opt.op);
    case symmar::Collective::kAllGather: return inputValue(static_cast<int>(i / per_rank), i % per_rank);
    default: return expectedValue(world, i, opt.op);
  }
}

/// One call of opt's collective; count is the call's own count argument (per rank for
/// reduce-scatter and all-gather).
symmarResult_t issue(const Options& opt, symmarComm_t comm, const void* send, void* recv, size_t count,
                     symmarAlgo_t algo, void* stream) {
  switch (opt.coll) {
    case symmar::Collective::kReduceScatter:
      return symmarReduceScatterAlgo(send, recv, count, opt.dtype, opt.op, algo, comm, stream);
    case symmar::Collective::kAllGather: return symmarAllGatherAlgo(send, recv, count, opt.dtype, algo, comm, stream);
    default: return symmarAllReduceAlgo(send, recv, count, opt.dtype, opt.op, algo, comm, stream);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Where one rank's send/recv buffers live and how a call is timed.
class Buffers {
 public:
  virtual ~Buffers() = default;
  virtual void* send() = 0;
  virtual void* recv() = 0;
  virtual void upload(const std::vector<char>& host) = 0;   // host pattern -> send
  virtual void download(std::vector<char>* host, size_t bytes) = 0;  // recv -> host
  virtual void* stream() { return nullptr; }
  /// Runs one call (issue()) and returns its duration in microseconds, or a negative value on error.
  virtual double timedCall(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo,
                           symmarResult_t* res) = 0;
  /// Before the ranks meet for a size: whatever a call of this shape makes on its first use (a
  /// captured graph), so that the timed calls allocate nothing.
  virtual void prepare(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo, symmarResult_t* res) {
    (void)comm, (void)count, (void)opt, (void)algo, (void)res;
  }
};

class HostBuffers : public Buffers {
 public:
  // offset: where in a page the buffers start (page-aligned by default; 16 is where malloc puts
  // a large allocation, which is what a caller's buffer usually is).
  // huge_pages: 2 MiB-aligned and marked MADV_HUGEPAGE before the first write, as torch's CPU
  // allocator places tensors of 2 MiB and more under THP_MEM_ALLOC_ENABLE=1.
  // in_place: the call's output is its send buffer (recv() is send()).
  HostBuffers(symmarComm_t comm, size_t bytes, bool symmetric, size_t offset, bool huge_pages, bool in_place)
      : comm_(comm), symmetric_(symmetric) {
    if (symmetric && symmarMemAlloc(comm, bytes, &send_) != symmarSuccess) send_ = nullptr;
    if (!symmetric) {
      send_base_ = allocate(bytes + offset, huge_pages);
      send_ = send_base_ ? static_cast<char*>(send_base_) + offset : nullptr;
    }
    if (in_place) {
      recv_ = send_;
      return;
    }
    recv_base_ = allocate(bytes + offset, huge_pages);
    recv_ = recv_base_ ? static_cast<char*>(recv_base_) + offset : nullptr;
  }
  ~HostBuffers() override {
    if (symmetric_ && send_) symmarMemFree(comm_, send_);
    free(send_base_);
    free(recv_base_);
  }
  void* send() override { return send_; }
  void* recv() override { return recv_; }
  void upload(const std::vector<char>& host) override {
    memcpy(send_, host.data(), host.size());
    pattern_ = host;
  }
  void download(std::vector<char>* host, size_t bytes) override {
    host->resize(bytes);
    memcpy(host->data(), recv_, bytes);
  }
  double timedCall(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo,
                   symmarResult_t* res) override {
    if (opt.hot || opt.in_place) {  // the call's input, freshly written with the values it holds
      int nranks = 1;
      symmarCommCount(comm, &nranks);
      const size_t blocks = opt.coll == symmar::Collective::kReduceScatter ? static_cast<size_t>(nranks) : 1;
      memcpy(send_, pattern_.data(), std::min(pattern_.size(), count * blocks * symmarTypeSize(opt.dtype)));
    }
    auto t0 = std::chrono::steady_clock::now();
    *res = issue(opt, comm, send_, recv_, count, algo, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

 private:
  symmarComm_t comm_;
  bool symmetric_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* send_base_ = nullptr;
  void* recv_base_ = nullptr;
  std::vector<char> pattern_;  // what upload() wrote, for --hot

  static void* allocate(size_t bytes, bool huge_pages) {
    const size_t align = huge_pages ? size_t(2) << 20 : 4096;
    void* p = aligned_alloc(align, (bytes + align - 1) / align * align);
    if (p && huge_pages) (void)madvise(p, (bytes + align - 1) / align * align, MADV_HUGEPAGE);  // advice only
    return p;
  }
};

#ifdef SYMMAR_PERF_WITH_CUDA
class GpuBuffers : public Buffers {
 public:
  GpuBuffers(symmarComm_t comm, size_t bytes, bool symmetric, int device) : comm_(comm), symmetric_(symmetric) {
    cudaSetDevice(device);
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
    if (symmetric) {
      if (symmarMemAlloc(comm, bytes, &send_) != symmarSuccess) send_ = nullptr;
    } else if (cudaMalloc(&send_, bytes) != cudaSuccess) {
      send_ = nullptr;
    }
    if (cudaMalloc(&recv_, bytes) != cudaSuccess) recv_ = nullptr;
  }
  ~GpuBuffers() override {
    for (Captured& g : graphs_) {
      if (g.exec) cudaGraphExecDestroy(g.exec);
    }
    if (symmetric_ && send_) symmarMemFree(comm_, send_);
    if (!symmetric_ && send_) cudaFree(send_);
    if (recv_) cudaFree(recv_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  void* send() override { return send_; }
  void* recv() override { return recv_; }
  void* stream() override { return stream_; }
  // On the timed stream: the allreduce (non-blocking stream) is ordered after the upload and
  // before the download.
  void upload(const std::vector<char>& host) override {
    cudaMemcpyAsync(send_, host.data(), host.size(), cudaMemcpyHostToDevice, stream_);
    settle();
  }
  void prepare(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo, symmarResult_t* res) override {
    if (!opt.graph || !captureIfNeeded(comm, count, opt, algo, res)) return;
    if (cudaGraphUpload(graphs_[algo].exec, stream_) != cudaSuccess) *res = symmarCudaError;
    settle();
  }
  void download(std::vector<char>* host, size_t bytes) override {
    host->resize(bytes);
    cudaMemcpyAsync(host->data(), recv_, bytes, cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
  }
  double timedCall(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo,
                   symmarResult_t* res) override {
    if (opt.graph && !captureIfNeeded(comm, count, opt, algo, res)) return -1;
    return timeOnStream(stream_, start_, stop_, comm, res, [&] {
      if (opt.graph) return cudaGraphLaunch(graphs_[algo].exec, stream_) == cudaSuccess ? symmarSuccess : symmarCudaError;
      return issue(opt, comm, send_, recv_, count, algo, stream_);
    });
  }

 private:
  // One captured graph per algorithm, so interleaved algorithms do not recapture every call.
  bool captureIfNeeded(symmarComm_t comm, size_t count, const Options& opt, symmarAlgo_t algo, symmarResult_t* res) {
    Captured& g = graphs_[algo];
    if (g.exec && g.count == count) return true;
    if (g.exec) cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    cudaGraph_t graph = nullptr;
    cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    *res = issue(opt, comm, send_, recv_, count, algo, stream_);
    cudaStreamEndCapture(stream_, &graph);
    if (*res != symmarSuccess || !graph || cudaGraphInstantiate(&g.exec, graph, 0) != cudaSuccess) {
      if (*res == symmarSuccess) *res = symmarCudaError;
      if (graph) cudaGraphDestroy(graph);
      return false;
    }
    cudaGraphDestroy(graph);
    g.count = count;
    return true;
  }

  // Ranks sharing a GPU: a kernel launched after this thread allocated memory or created events
  // (the buffers, a graph's upload) was held on an H200 until every kernel running on the GPU had
  // finished, and its peers' kernels spin until it arrives. A completed memset on the stream,
  // before the ranks meet, leaves nothing of that for the first call (docs/gpu-results.md).
  void settle() {
    if (recv_) cudaMemsetAsync(recv_, 0, 1, stream_);
    cudaStreamSynchronize(stream_);
  }

  struct Captured {
    cudaGraphExec_t exec = nullptr;
    size_t count = 0;
  };
  Captured graphs_[symmarNumAlgos];
  symmarComm_t comm_;
  bool symmetric_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};
#endif

/// The swept sizes: whole elements, and for reduce-scatter and all-gather whole blocks (unit).
std::vector<size_t> sizes(const Options& opt, size_t unit) {
  std::vector<size_t> out;
  for (double b = static_cast<double>(std::max(opt.min_bytes, unit)); b <= static_cast<double>(opt.max_bytes);
       b = opt.factor > 1 ? b * opt.factor : b + 1e18) {
    size_t bytes = static_cast<size_t>(b) / unit * unit;
    if (out.empty() || out.back() != bytes) out.push_back(bytes);
  }
  return out;
}


/// One rank's buffers for dtype, filled with its inputs; null (on every rank) when some rank could
/// not allocate them.
std::unique_ptr<Buffers> makeBuffers(symmarComm_t comm, Group& group, const Options& opt, symmarDataType_t dtype,
                                     int gpu_device) {
  std::unique_ptr<Buffers> bufs;
  (void)gpu_device;
#ifdef SYMMAR_PERF_WITH_CUDA
  if (gpu_device >= 0) bufs = std::make_unique<GpuBuffers>(comm, opt.max_bytes, opt.symmetric, gpu_device);
#endif
  if (!bufs) bufs = std::make_unique<HostBuffers>(comm, opt.max_bytes, opt.symmetric, opt.offset, opt.huge_pages, opt.in_place);
  if (group.sumOf(bufs->send() && bufs->recv() ? 0 : 1) != 0) return nullptr;
  const size_t elem = symmarTypeSize(dtype);
  std::vector<char> host(opt.max_bytes);
  for (size_t i = 0; i < opt.max_bytes / elem; ++i) symmar::storeElement(host.data(), dtype, i, inputValue(group.rank(), i));
  bufs->upload(host);
  return bufs;
}

}  // namespace

bool runSweep(symmarComm_t comm, Group& group, const Options& opt, int gpu_device, std::vector<Result>* results,
              std::string* error) {
  if (opt.in_place && gpu_device >= 0) {
    *error = "--in-place times host buffers only; this comm runs on a GPU";
    return false;
  }
  const int world = group.size();
  const bool allreduce = opt.coll == symmar::Collective::kAllReduce;
  const std::vector<symmarDataType_t> dtypes = opt.dtypes.empty() ? std::vector<symmarDataType_t>{opt.dtype} : opt.dtypes;
  // Each dtype has buffers and options of its own; sizes are whole elements of every dtype.
  std::vector<std::unique_ptr<Buffers>> bufs;
  std::vector<Options> dopts;
  size_t elem_max = 1;
  for (symmarDataType_t d : dtypes) {
    bufs.push_back(makeBuffers(comm, group, opt, d, gpu_device));
    if (!bufs.back()) {
      *error = "could not allocate " + std::to_string(opt.max_bytes) + "-byte buffers on every rank";
      return false;
    }
    dopts.push_back(opt);
    dopts.back().dtype = d;
    elem_max = std::max(elem_max, symmarTypeSize(d));
  }
  const size_t unit = allreduce ? elem_max : elem_max * static_cast<size_t>(world);

  std::vector<symmarAlgo_t> algos = opt.algos;
  if (opt.all_algos) {
    algos = {symmarAlgoAuto};
    for (int a = symmarAlgoOneShot; a < symmarNumAlgos; ++a) {
      symmarResult_t res = symmarSuccess;
      bufs[0]->prepare(comm, 1, dopts[0], static_cast<symmarAlgo_t>(a), &res);
      group.barrier();
      if (res == symmarSuccess) bufs[0]->timedCall(comm, 1, dopts[0], static_cast<symmarAlgo_t>(a), &res);  // 1 element
      if (group.sumOf(res == symmarSuccess ? 0 : 1) == 0) algos.push_back(static_cast<symmarAlgo_t>(a));
    }
  }
  // A variant: one algorithm on one dtype's buffers.
  struct Variant {
    symmarAlgo_t algo;
    size_t d;  // index into dtypes
  };
  std::vector<Variant> variants;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    for (symmarAlgo_t a : algos) variants.push_back({a, d});
  }
  // lamport serves small messages only: larger sizes get no row for it.
  auto serves = [](symmarAlgo_t a, size_t bytes) { return a != symmarAlgoLamport || bytes <= SYMMAR_LAMPORT_MAX_BYTES; };
  // Sizes outside, variants inside, interleaved in short runs (perf_schedule.h): every algorithm
  // and dtype is timed in the same moments as the others, so ratios hold even on a machine whose
  // speed drifts, and each in the state its own calls leave.
  const size_t nv = variants.size();
  std::vector<std::vector<Result>> per_variant(nv);
  for (size_t bytes : sizes(opt, unit)) {
    std::vector<std::vector<double>> times(nv);
    symmarResult_t res = symmarSuccess;
    size_t failed = 0;
    auto callCount = [&](const Variant& v) {
      const size_t count = bytes / symmarTypeSize(dtypes[v.d]);
      return allreduce ? count : count / static_cast<size_t>(world);  // the call's own argument
    };
    std::vector<size_t> serving;  // the variants timed at this size
    for (size_t k = 0; k < nv; ++k) {
      if (serves(variants[k].algo, bytes)) serving.push_back(k);
    }
    for (size_t k : serving) {
      failed = k;
      bufs[variants[k].d]->prepare(comm, callCount(variants[k]), dopts[variants[k].d], variants[k].algo, &res);
      if (res != symmarSuccess) break;
    }
    group.barrier();
    for (const ScheduledCall& call : interleavedSchedule(serving.size(), opt.warmup, opt.iters, opt.block)) {
      if (res != symmarSuccess) break;
      const size_t k = serving[call.variant];
      const Variant& v = variants[k];
      failed = k;
      const double us = bufs[v.d]->timedCall(comm, callCount(v), dopts[v.d], v.algo, &res);
      if (res != symmarSuccess) break;
      if (call.timed) times[k].push_back(us);
    }
    for (size_t k = 0; k < nv; ++k) {
      const Variant& v = variants[k];
      const Options& vo = dopts[v.d];
      if (!serves(v.algo, bytes)) continue;
      const size_t call_count = callCount(v), count = bytes / symmarTypeSize(vo.dtype);
      long wrong = 0;
      if (opt.check && res == symmarSuccess) {  // one more call per variant, checked
        bufs[v.d]->timedCall(comm, call_count, vo, v.algo, &res);
        failed = k;
        const size_t out_count = opt.coll == symmar::Collective::kReduceScatter ? call_count : count;
        std::vector<char> out;
        bufs[v.d]->download(&out, out_count * symmarTypeSize(vo.dtype));
        if (opt.plant_wrong && group.rank() == 0) symmar::storeElement(out.data(), vo.dtype, 0, 12345);
        for (size_t i = 0; i < out_count; ++i) {
          wrong += symmar::loadElement(out.data(), vo.dtype, i) != expectedAt(vo, world, group.rank(), call_count, i);
        }
      }
      if (group.sumOf(res == symmarSuccess ? 0 : 1) != 0) {
        const Variant& f = variants[failed];
        *error = std::string(symmar::collectiveName(opt.coll)) + " failed with " + symmarAlgoName(f.algo) + " on " +
                 symmar::dtypeName(dtypes[f.d]) + " at " + std::to_string(bytes) + " bytes: " + symmarGetErrorString(res) +
                 " (" + symmarGetLastError(comm) + ")";
        return false;
      }
      Result r;
      r.algo = v.algo;
      r.dtype = vo.dtype;
      r.bytes = bytes;
      r.count = count;
      r.time_us = group.maxOf(median(times[k]));
      r.min_us = group.maxOf(times[k].empty() ? 0.0 : *std::min_element(times[k].begin(), times[k].end()));
      r.max_us = group.maxOf(times[k].empty() ? 0.0 : *std::max_element(times[k].begin(), times[k].end()));
      r.algbw_gbs = r.time_us > 0 ? bytes / (r.time_us * 1e3) : 0;
      r.busbw_gbs = r.algbw_gbs * busFactor(opt.coll, world);
      r.wrong = group.sumOf(wrong);
      r.planned = r.algo;
      if (r.algo == symmarAlgoAuto && allreduce) symmarCommPlan(comm, count, vo.dtype, vo.op, &r.planned);
      per_variant[k].push_back(r);
    }
  }
  for (const auto& rs : per_variant) results->insert(results->end(), rs.begin(), rs.end());
  return true;
}

}  // namespace perf
